// fuzz_st_index.c: model.safetensors.index.json next to one valid shard (made once): weight_map, shard names,
// duplicate and missing tensors.
#include <string.h>

#include "fuzz_common.h"
#include "io/safetensors.h"

static void body(const uint8_t *data, size_t n) {
    static int made;
    if (!made) {   // a shard holding "a" (F32, 2 values) and "b" (BF16, 1 value)
        static const char H[] = "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                                "\"b\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[8,10]}}";
        uint8_t buf[256];
        const uint64_t hn = sizeof H - 1;
        memcpy(buf, &hn, 8);
        memcpy(buf + 8, H, hn);
        memset(buf + 8 + hn, 0, 10);
        fuzz_file("model-00001-of-00001.safetensors", buf, 8 + hn + 10);
        made = 1;
    }
    fuzz_file("model.safetensors.index.json", data, n);
    st_dir d;
    char err[1024];
    if (st_dir_open_err(&d, fuzz_dir(), err, sizeof err) == 0) st_dir_close(&d);
}
FUZZ_TARGET(body)
