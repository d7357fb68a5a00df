// fuzz_parquet.c: a Parquet dataset file read whole: footer (Thrift), schema, every page of every column
// (PLAIN, dictionary, RLE/bit-packed, DELTA encodings; SNAPPY/ZSTD/GZIP), rows assembled as JSON.
#include "data/parquet.h"
#include "fuzz_common.h"

static void body(const uint8_t *data, size_t n) {
    const char *p = fuzz_file("rows.parquet", data, n);
    rlc_parquet pq;
    rlc_parquet_open(&pq, p);
    while (rlc_parquet_next(&pq)) {}
    rlc_parquet_close(&pq);
}
FUZZ_TARGET(body)
