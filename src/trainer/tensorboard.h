// tensorboard.h: TensorBoard event files, written by hand (no TensorFlow, no protobuf library), as verl's
// tensorboard logger (torch's SummaryWriter) writes them: scalars for every metric at its step.
//
// An event file is a sequence of TFRecords:
//   uint64 length (little-endian), uint32 masked_crc32c(length bytes), data[length], uint32 masked_crc32c(data)
// with masked_crc32c(x) = ((crc >> 15) | (crc << 17)) + 0xa282ead8 over CRC-32C (Castagnoli). Each record holds
// one tensorflow.Event protobuf:
//   Event   { double wall_time = 1; int64 step = 2;
//             oneof { string file_version = 3; Summary summary = 5; SessionLog session_log = 7; } }
//   Summary { repeated Value value = 1; }   Value { string tag = 1; float simple_value = 2; }
// The first event carries file_version "brain.Event:2"; each logged step is one event with all its scalars.
#pragma once
#include <stddef.h>
#include <stdint.h>

#include "core/strbuf.h"
#include "trainer/metrics.h"

typedef struct {
    int fd;              // the event file, opened O_APPEND
    char *path;          // its path: <dir>/events.out.tfevents.<unix time>.<host>.<pid>.<n>
    rlc_strbuf event;    // scratch: the encoded Event
    rlc_strbuf summary;  // scratch: the encoded Summary
    rlc_strbuf record;   // scratch: the framed record
} tb_writer;

// verl's directory: $TENSORBOARD_DIR if set, else tensorboard_log/<project>/<experiment> (malloc'd).
char *tb_log_dir(const char *project, const char *experiment);

// Creates dir (and parents) and a new event file in it, and writes the file_version event. Dies naming the path
// on any error.
void tb_writer_init(tb_writer *w, const char *dir);
void tb_writer_free(tb_writer *w);

// One event at step with the n scalars tags[i] = vals[i] (stored as float32, as simple_value is; NaN stays NaN),
// stamped with wall_time (seconds since the epoch). One write(2); dies on a write error.
void tb_write_scalars(tb_writer *w, int64_t step, double wall_time, int64_t n, const char *const *tags,
                      const double *vals);
// Every metric of m at step, stamped now.
void tb_write_metrics(tb_writer *w, const rlc_metrics *m, int64_t step);
// A SessionLog START event at step (Event.session_log = 7 { status = 1: START }): TensorBoard then drops the
// run's earlier events at steps >= step, those of a run that was resumed from an earlier checkpoint or restarted.
void tb_write_session_start(tb_writer *w, int64_t step);

// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), table-driven (8 bytes per step), and its bitwise reference.
uint32_t tb_crc32c(const void *data, size_t n);
uint32_t tb_crc32c_ref(const void *data, size_t n);
// TFRecord's masking of a CRC stored next to the data it covers.
uint32_t tb_masked_crc32c(const void *data, size_t n);
// The TFRecord framing of data[n] appended to out.
void tb_frame_record(rlc_strbuf *out, const void *data, size_t n);
