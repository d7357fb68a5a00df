# fuzz.mk (included by the Makefile): libFuzzer targets, one per reader of user files (fuzz/fuzz_<reader>.c),
# built with Debian's clang under -fsanitize=fuzzer,address,undefined into build-fuzz/. The library is
# compiled again with clang and -fsanitize=fuzzer-no-link,address,undefined so coverage reaches the readers.
#   make fuzz                          build every target
#   make fuzz-run FUZZ_SECONDS=30      run each target for FUZZ_SECONDS on a copy of its checked-in corpus
#                                      (fuzz/corpus/<target>/); findings land in build-fuzz/findings/<target>/
# A new reader gets fuzz/fuzz_<reader>.c (FUZZ_TARGET(body), see fuzz/fuzz_common.h) and seeds in
# fuzz/corpus/<reader>/ (written by fuzz/make_corpus.sh); nothing here changes.
FUZZ_CC      ?= clang
FUZZ_SECONDS ?= 30
FUZZ_BUILD   := build-fuzz
FUZZ_SRC     := $(wildcard fuzz/fuzz_*.c)
FUZZ_TARGETS := $(filter-out fuzz_common,$(FUZZ_SRC:fuzz/%.c=%))
FUZZ_BIN     := $(FUZZ_TARGETS:%=$(FUZZ_BUILD)/%)
FUZZ_CFLAGS  := -std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer -fopenmp -Isrc -Ifuzz \
                -I/usr/include/x86_64-linux-gnu/openblas-openmp -Wall -Wno-unused-parameter -Wno-unused-function -Wno-pass-failed \
                -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_LIB_OBJ := $(LIB_SRC:%.c=$(FUZZ_BUILD)/obj/%.o)

.PHONY: fuzz fuzz-run
fuzz: $(FUZZ_BIN)

$(FUZZ_BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link -MMD -MP -c $< -o $@

$(FUZZ_BUILD)/librlc.a: $(FUZZ_LIB_OBJ)
	rm -f $@ && ar rcs $@ $^

# exit() is wrapped so a reader's rlc_die returns to the harness (fuzz/fuzz_common.h)
$(FUZZ_BUILD)/fuzz_%: $(FUZZ_BUILD)/obj/fuzz/fuzz_%.o $(FUZZ_BUILD)/obj/fuzz/fuzz_common.o $(FUZZ_BUILD)/librlc.a
	$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer -Wl,--wrap=exit -o $@ $^ $(LDLIBS)

fuzz-run: fuzz
	fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

-include $(shell find $(FUZZ_BUILD) -name '*.d' 2>/dev/null)
