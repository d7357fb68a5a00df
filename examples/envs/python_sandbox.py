#!/usr/bin/env python3
"""python_sandbox.py: an rlc-env/1 environment (docs/env-protocol.md) with one tool, `python`, that runs
model-written Python in a sandbox and returns its output.

Each call runs
    [setpriv --reuid U --regid U --clear-groups]            (when started as root: see below)
    bwrap --unshare-all --die-with-parent --new-session
          --ro-bind /usr /usr --symlink usr/bin /bin --symlink usr/lib /lib --symlink usr/lib64 /lib64
          --proc /proc --dev /dev --tmpfs /tmp --chdir /tmp --clearenv --setenv PATH /usr/bin --setenv HOME /tmp
      -- prlimit --as=MEM --cpu=CPU --nproc=NPROC --fsize=1048576 --nofile=64
      -- timeout -s KILL WALL python3 -I -S -c CODE
so the code sees no network (its own empty network namespace), a read-only /usr and nothing else of the host
filesystem, a private /tmp (a tmpfs, gone after the call), its own PID namespace (everything it started dies
with it), and limits on address space, CPU seconds, processes, file size, open files, wall time and output.
A run that fails (an exception, a non-zero exit, a limit hit) is a tool result with is_error: true, never an
environment error.

Root: the kernel exempts uid 0 from RLIMIT_NPROC, so a fork bomb run as root is held only by the wall-clock
kill. Started as root, this environment therefore runs every call as an unprivileged user (--user, default
nobody) through setpriv, which makes the process limit bind; the limit then counts all calls running at once
under that user. --user root keeps uid 0 (not recommended). See docs/agents.md.

usage: python_sandbox.py [--timeout S (10)] [--cpu S (5)] [--memory-mb M (512)] [--nproc N (256)]
                         [--max-output BYTES (65536)] [--jobs J (4)] [--user NAME (nobody, when root)]
"""
import argparse
import json
import os
import pwd
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

ap = argparse.ArgumentParser()
ap.add_argument("--timeout", type=float, default=10.0)
ap.add_argument("--cpu", type=int, default=5)
ap.add_argument("--memory-mb", type=int, default=512)
ap.add_argument("--nproc", type=int, default=256)
ap.add_argument("--max-output", type=int, default=65536)
ap.add_argument("--jobs", type=int, default=4)
ap.add_argument("--user", default=None)
opt = ap.parse_args()

TOOL = {"type": "function", "function": {
    "name": "python",
    "description": "Run a Python 3 program in a sandbox (no network, no files kept) and return what it prints. "
                   "Use print() to see results.",
    "parameters": {"type": "object", "properties": {
        "code": {"type": "string", "description": "The complete program"}}, "required": ["code"]}}}

user = opt.user if opt.user is not None else ("nobody" if os.geteuid() == 0 else None)
if user == "root" or (user is not None and os.geteuid() != 0):
    user = None   # keep the current user (only root can switch)
if user is not None:
    pw = pwd.getpwnam(user)
    PRIV = ["setpriv", "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid), "--clear-groups", "--"]
else:
    PRIV = []


def sandbox_cmd(code):
    return PRIV + [
        "bwrap", "--unshare-all", "--die-with-parent", "--new-session",
        "--ro-bind", "/usr", "/usr", "--symlink", "usr/bin", "/bin", "--symlink", "usr/lib", "/lib",
        "--symlink", "usr/lib64", "/lib64", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--chdir", "/tmp",
        "--clearenv", "--setenv", "PATH", "/usr/bin", "--setenv", "HOME", "/tmp",
        "--", "prlimit", "--as=%d" % (opt.memory_mb << 20), "--cpu=%d" % opt.cpu, "--nproc=%d" % opt.nproc,
        "--fsize=1048576", "--nofile=64",
        "--", "timeout", "-s", "KILL", "%g" % opt.timeout, "python3", "-I", "-S", "-c", code]


def run(code):
    """(text, is_error) of one sandboxed run."""
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(sandbox_cmd(code), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, start_new_session=True)
    except OSError as e:
        return "sandbox failed to start: %s" % e, True
    out = bytearray()
    cut = False
    deadline = t0 + opt.timeout + 5   # the inner timeout kills first; this bounds a stuck sandbox
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([p.stdout], [], [], left)
        if not r:
            break
        chunk = os.read(p.stdout.fileno(), 65536)
        if not chunk:
            break
        out += chunk
        if len(out) > opt.max_output:
            cut = True
            del out[opt.max_output:]
            break
    if p.poll() is None:
        try:
            os.killpg(p.pid, signal.SIGKILL)   # bwrap dies, and its PID namespace with everything in it
        except ProcessLookupError:
            pass
    rc = p.wait()
    p.stdout.close()
    text = out.decode("utf-8", "replace")
    notes = []
    if cut:
        notes.append("[output cut at %d bytes]" % opt.max_output)
    if rc in (137, -9) or rc == 128 + signal.SIGKILL:
        notes.append("[killed: the %g s time limit or the %d s CPU limit]" % (opt.timeout, opt.cpu))
    elif rc == 152 or rc == 128 + signal.SIGXCPU:
        notes.append("[killed: the %d s CPU limit]" % opt.cpu)
    elif rc != 0 and not cut:
        notes.append("[exit status %d]" % rc)
    if notes:
        text = (text + ("\n" if text and not text.endswith("\n") else "") + " ".join(notes))
    return text, rc != 0 or cut


lock = threading.Lock()


def send(obj):
    with lock:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, separators=(",", ":")) + "\n")
        sys.stdout.flush()


def step(m):
    results = []
    for c in m["tool_calls"]:
        code = c["arguments"].get("code") if isinstance(c["arguments"], dict) else None
        if not isinstance(code, str):
            results.append({"id": c["id"], "content": "Error: the argument \"code\" must be a string", "is_error": True})
            continue
        text, err = run(code)
        results.append({"id": c["id"], "content": text, "is_error": err})
    send({"type": "observation", "traj": m["traj"], "results": results})


pool = ThreadPoolExecutor(max_workers=max(1, opt.jobs))
for line in sys.stdin:
    m = json.loads(line)
    t = m["type"]
    if t == "hello":
        send({"type": "hello", "protocol": "rlc-env/1", "tools": [TOOL]})
    elif t == "start":
        send({"type": "started", "traj": m["traj"]})
    elif t == "step":
        pool.submit(step, m)   # answered when it finishes, in any order
    elif t == "finish":
        send({"type": "finished", "traj": m["traj"], "score": None})
    else:
        send({"type": "error", "traj": m.get("traj"), "message": "python_sandbox: unknown request type %r" % t})
pool.shutdown(wait=True)
