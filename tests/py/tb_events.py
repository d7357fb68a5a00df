"""Decode TensorBoard event files independently of rlc: TFRecord framing checked with a bitwise CRC-32C written
here, events parsed by protoc-generated classes (Debian's protobuf-compiler + python3-protobuf) from TensorBoard's
event.proto / summary.proto, copied below (TensorProto, which only tensor summaries use, is kept as bytes: the
same wire type, so the decoding of everything else is unchanged).

  tb_events.py dump FILE                  one JSON line per event
  tb_events.py check DIR METRICS.jsonl    every metric of every line is a scalar at its step (exit 1 if not), after
                                          TensorBoard's purge: a SessionLog START at step s drops the steps >= s
                                          that earlier events (of this or an earlier file) logged
  tb_events.py expect FILE EXPECT.json    the file holds exactly the events described (the C test's writes)
Exit status 3: protoc or the protobuf module is missing (the caller skips).
"""
import glob, importlib, json, math, os, shutil, struct, subprocess, sys, tempfile

EVENT_PROTO = r'''
syntax = "proto3";
package tensorboard;
import "summary.proto";
message Event {
  double wall_time = 1;
  int64 step = 2;
  oneof what {
    string file_version = 3;
    bytes graph_def = 4;
    Summary summary = 5;
    LogMessage log_message = 6 [deprecated = true];
    SessionLog session_log = 7;
    TaggedRunMetadata tagged_run_metadata = 8;
    bytes meta_graph_def = 9;
  }
  SourceMetadata source_metadata = 10;
}
message SourceMetadata { string writer = 1; }
message LogMessage {
  enum Level { UNKNOWN = 0; DEBUGGING = 10; INFO = 20; WARN = 30; ERROR = 40; FATAL = 50; }
  Level level = 1;
  string message = 2;
}
message SessionLog {
  enum SessionStatus { STATUS_UNSPECIFIED = 0; START = 1; STOP = 2; CHECKPOINT = 3; }
  SessionStatus status = 1;
  string checkpoint_path = 2;
  string msg = 3;
}
message TaggedRunMetadata { string tag = 1; bytes run_metadata = 2; }
'''

SUMMARY_PROTO = r'''
syntax = "proto3";
package tensorboard;
message SummaryDescription { string type_hint = 1; }
message HistogramProto {
  double min = 1; double max = 2; double num = 3; double sum = 4; double sum_squares = 5;
  repeated double bucket_limit = 6 [packed = true];
  repeated double bucket = 7 [packed = true];
}
enum DataClass { DATA_CLASS_UNKNOWN = 0; DATA_CLASS_SCALAR = 1; DATA_CLASS_TENSOR = 2; DATA_CLASS_BLOB_SEQUENCE = 3; }
message SummaryMetadata {
  message PluginData { string plugin_name = 1; bytes content = 2; }
  PluginData plugin_data = 1;
  string display_name = 2;
  string summary_description = 3;
  DataClass data_class = 4;
}
message Summary {
  message Image { int32 height = 1; int32 width = 2; int32 colorspace = 3; bytes encoded_image_string = 4; }
  message Audio {
    float sample_rate = 1; int64 num_channels = 2; int64 length_frames = 3;
    bytes encoded_audio_string = 4; string content_type = 5;
  }
  message Value {
    string node_name = 7;
    string tag = 1;
    SummaryMetadata metadata = 9;
    oneof value {
      float simple_value = 2;
      bytes obsolete_old_style_histogram = 3;
      Image image = 4;
      HistogramProto histo = 5;
      Audio audio = 6;
      bytes tensor = 8;
    }
  }
  repeated Value value = 1;
}
'''


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def load_protos():
    if not shutil.which("protoc"):
        sys.exit(3)
    try:
        import google.protobuf  # noqa: F401
    except ImportError:
        sys.exit(3)
    d = tempfile.mkdtemp(prefix="tb-proto-")
    for name, text in (("event.proto", EVENT_PROTO), ("summary.proto", SUMMARY_PROTO)):
        open(os.path.join(d, name), "w").write(text)
    subprocess.check_call(["protoc", "-I", d, "--python_out", d, os.path.join(d, "event.proto"),
                           os.path.join(d, "summary.proto")])
    sys.path.insert(0, d)
    return importlib.import_module("event_pb2")


def records(path):
    """The TFRecord payloads of a file; raises on a bad length or data CRC or a truncated record."""
    b = open(path, "rb").read()
    off, out = 0, []
    while off < len(b):
        if off + 12 > len(b):
            raise ValueError("%s: truncated record header at %d" % (path, off))
        hdr = b[off:off + 8]
        (n,) = struct.unpack("<Q", hdr)
        (hc,) = struct.unpack("<I", b[off + 8:off + 12])
        if hc != masked(hdr):
            raise ValueError("%s: length CRC mismatch at %d" % (path, off))
        data = b[off + 12:off + 12 + n]
        if len(data) != n or off + 16 + n > len(b):
            raise ValueError("%s: truncated record at %d" % (path, off))
        (dc,) = struct.unpack("<I", b[off + 12 + n:off + 16 + n])
        if dc != masked(data):
            raise ValueError("%s: data CRC mismatch at %d" % (path, off))
        out.append(data)
        off += 16 + n
    return out


def events(pb, path):
    out = []
    for data in records(path):
        e = pb.Event()
        e.ParseFromString(data)
        re = e.SerializeToString()
        if re != data:   # canonical encoding: nothing unknown, nothing out of order
            i = next((k for k in range(min(len(re), len(data))) if re[k] != data[k]), min(len(re), len(data)))
            raise ValueError("%s: an event does not re-encode to its bytes (%d vs %d bytes, first difference at %d: "
                             "%s vs %s)" % (path, len(data), len(re), i, data[max(0, i - 12):i + 8].hex(),
                                            re[max(0, i - 12):i + 8].hex()))
        out.append(e)
    return out


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def same(want, got):
    """A JSON value (None for NaN) against a float32 simple_value."""
    if want is None:   # metrics.jsonl writes NaN and +-inf as null
        return not math.isfinite(got)
    w = f32(float(want))
    return w == got or (math.isinf(w) and math.isinf(got) and (w > 0) == (got > 0))


def check(pb, d, metrics):
    files = sorted(glob.glob(os.path.join(d, "events.out.tfevents.*")))
    bad = []
    if not files:
        bad.append("no event files in %s" % d)
    scal, n_ev, starts, first_wall = [], 0, [], None
    for f in files:
        evs = events(pb, f)
        n_ev += len(evs)
        if not evs or evs[0].file_version != "brain.Event:2":
            bad.append("%s: the first event is not file_version brain.Event:2" % os.path.basename(f))
        if evs and first_wall is None:
            first_wall = evs[0].wall_time
        for e in evs:
            if e.HasField("session_log") and e.session_log.status == pb.SessionLog.START:
                starts.append(e.step)
                scal = [x for x in scal if x.step < e.step]
            elif e.HasField("summary"):
                scal.append(e)
    rows = [json.loads(l) for l in open(metrics) if l.strip()]
    if len(scal) != len(rows):
        bad.append("%d scalar events for %d metrics lines" % (len(scal), len(rows)))
    n = 0
    for i, (row, e) in enumerate(zip(rows, scal)):
        step = int(row.get("training/global_step", 0))
        if e.step != step:
            bad.append("line %d: event step %d, metrics step %d" % (i + 1, e.step, step))
        vals = {v.tag: v for v in e.summary.value}
        if len(vals) != len(e.summary.value) or set(vals) != set(row):
            bad.append("line %d: tags differ: %s" % (i + 1, sorted(set(vals) ^ set(row))[:5]))
        for k, want in row.items():
            v = vals.get(k)
            if v is None:
                continue
            if v.WhichOneof("value") != "simple_value" or not same(want, v.simple_value):
                bad.append("step %d %s: event %r, metrics %r" % (step, k, v.simple_value, want))
            n += 1
        if not (e.wall_time > 1.5e9 and e.wall_time >= first_wall):
            bad.append("line %d: wall_time %r" % (i + 1, e.wall_time))
    print("%d event file(s), %d events, session starts at steps %s; %d scalar values checked against %s (%d lines)%s" % (
        len(files), n_ev, starts, n, os.path.basename(metrics), len(rows), "; " + "; ".join(bad[:8]) if bad else ""))
    return not bad and n > 0


def expect(pb, path, spec):
    """spec: [{"step": s, "values": {tag: value or null}} or {"session_start": s} ...], the events after
    file_version, in order."""
    evs = events(pb, path)
    want = json.load(open(spec))
    bad = []
    if evs[0].file_version != "brain.Event:2" or evs[0].HasField("summary"):
        bad.append("first event: %r" % evs[0])
    got = evs[1:]
    if len(got) != len(want):
        bad.append("%d scalar events, want %d" % (len(got), len(want)))
    for g, w in zip(got, want):
        if "session_start" in w:
            if not (g.HasField("session_log") and g.session_log.status == pb.SessionLog.START
                    and g.step == w["session_start"]):
                bad.append("want a session START at step %d, got %r" % (w["session_start"], g))
            continue
        if g.step != w["step"]:
            bad.append("step %d, want %d" % (g.step, w["step"]))
        tags = [v.tag for v in g.summary.value]
        if tags != list(w["values"]):
            bad.append("step %d: tags %r, want %r" % (w["step"], tags[:4], list(w["values"])[:4]))
        for v in g.summary.value:
            if v.tag in w["values"] and not same(w["values"][v.tag], v.simple_value):
                bad.append("step %d %s: %r, want %r" % (w["step"], v.tag[:40], v.simple_value, w["values"][v.tag]))
    print("%s: %d events%s" % (os.path.basename(path), len(evs), "; " + "; ".join(bad[:8]) if bad else ""))
    return not bad


def main():
    pb = load_protos()
    cmd = sys.argv[1]
    if cmd == "dump":
        for e in events(pb, sys.argv[2]):
            print(json.dumps({"wall_time": e.wall_time, "step": e.step, "file_version": e.file_version,
                              "values": {v.tag: v.simple_value for v in e.summary.value}}))
        return 0
    if cmd == "check":
        return 0 if check(pb, sys.argv[2], sys.argv[3]) else 1
    if cmd == "expect":
        return 0 if expect(pb, sys.argv[2], sys.argv[3]) else 1
    return 2


if __name__ == "__main__":
    sys.exit(main())
