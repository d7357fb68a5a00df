"""A verl-style custom reward function (custom_reward_function.path / name) used by tests/test_reward.c."""


def compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs):
    ok = ground_truth in solution_str
    if extra_info and extra_info.get("as_dict"):
        return {"score": 1.0 if ok else -1.0, "acc": float(ok), "pred": solution_str[-2:], "note": "text"}
    return 1.0 if ok else 0.0


def always_two(data_source, solution_str, ground_truth, extra_info=None):
    return 2
