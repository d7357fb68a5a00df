# rlc build. `make` builds build/rlc and build/librlc.a; `make test` runs the suite;
# `make SAN=1 test` builds into build-san/ with AddressSanitizer + UndefinedBehaviorSanitizer.
CC      ?= cc
SAN     ?= 0
MPI     ?= auto
BUILD   := $(if $(filter 1,$(SAN)),build-san,build)

# MPI: built in when mpicc is found (MPI=auto), or forced on/off with MPI=1 / MPI=0.
ifeq ($(MPI),auto)
  MPI := $(if $(shell command -v mpicc 2>/dev/null),1,0)
endif

WARN    := -Wall -Wextra -Wno-unused-parameter -Wno-sign-compare -Wshadow=local -Wvla
OPT     := -O3 -march=native -fno-math-errno -fno-trapping-math
CFLAGS  += -std=c11 -D_GNU_SOURCE -g $(WARN) -fopenmp -Isrc -I/usr/include/x86_64-linux-gnu/openblas-openmp
LDLIBS  += -L/usr/lib/x86_64-linux-gnu/openblas-openmp -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -lcjson -lyaml -lpcre2-8 -lutf8proc -lsnappy -lzstd -lz -lm -lpthread
ifeq ($(SAN),1)
  OPT     := -O1 -march=native -fno-omit-frame-pointer
  CFLAGS  += -fsanitize=address,undefined -fno-sanitize-recover=undefined
  LDFLAGS += -fsanitize=address,undefined
endif
ifeq ($(MPI),1)
  MPI_CFLAGS := $(shell mpicc --showme:compile 2>/dev/null)
  MPI_LIBS   := $(shell mpicc --showme:link 2>/dev/null)
  CFLAGS += -DRLC_WITH_MPI $(MPI_CFLAGS)
  LDLIBS += $(MPI_LIBS)
endif
CFLAGS += $(OPT)

LIB_SRC  := $(filter-out src/cli/%,$(wildcard src/*/*.c))
CLI_SRC  := $(wildcard src/cli/*.c)
TEST_SRC := $(wildcard tests/test_*.c)
BENCH_SRC:= $(wildcard bench/bench_*.c)
LIB_OBJ  := $(LIB_SRC:%.c=$(BUILD)/obj/%.o)
CLI_OBJ  := $(CLI_SRC:%.c=$(BUILD)/obj/%.o)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
BENCH_BIN:= $(BENCH_SRC:bench/%.c=$(BUILD)/bench/%)
TESTLIB  := $(BUILD)/obj/tests/testlib.o
# The rollout kernels' other ISAs, built and tested on any machine: AVX2 (x86-64-v3) and portable C. A kernel K's
# test_K_<isa> links tests/test_K.c against src/rollout/K.c built for that ISA (it takes the archive's place).
ISA_KERNELS := rowgemm paged_attention
KERNEL_ISAS := avx2 scalar
ISA_MARCH_avx2   := -march=x86-64-v3
ISA_MARCH_scalar := -march=x86-64
TEST_BIN += $(foreach k,$(ISA_KERNELS),$(KERNEL_ISAS:%=$(BUILD)/tests/test_$(k)_%))
BENCH_BIN+= $(ISA_KERNELS:%=$(BUILD)/bench/bench_%_avx2)

.PHONY: all test bench deps clean demo install
# Keep every object the pattern chains make (tests/, bench/, the per-ISA kernels): make would otherwise delete
# them as intermediates, and the next `make test` after a one-file change would recompile all of them.
.SECONDARY:
all: $(BUILD)/rlc $(BUILD)/librlc.a $(TEST_BIN) $(BENCH_BIN)

deps:
	scripts/install-deps.sh

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/librlc.a: $(LIB_OBJ)
	@mkdir -p $(dir $@)
	rm -f $@ && ar rcs $@ $^

$(BUILD)/rlc: $(CLI_OBJ) $(BUILD)/librlc.a
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $(CLI_OBJ) $(BUILD)/librlc.a $(LDLIBS)

$(BUILD)/tests/%: $(BUILD)/obj/tests/%.o $(TESTLIB) $(BUILD)/librlc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(TESTLIB) $(BUILD)/librlc.a $(LDLIBS)

# -march=native expands to explicit -m flags that a later -march would not undo, so it is dropped here.
define ISA_RULES
$(BUILD)/obj/isa-$(1)/%.o: src/rollout/%.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(filter-out -march=native,$$(CFLAGS)) $$(ISA_MARCH_$(1)) -MMD -MP -c $$< -o $$@

$(BUILD)/obj/isa-$(1)/test_%.o: tests/test_%.c
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) -DRLC_EXPECT_ISA='"$(1)"' -MMD -MP -c $$< -o $$@

$(BUILD)/tests/test_%_$(1): $(BUILD)/obj/isa-$(1)/test_%.o $(BUILD)/obj/isa-$(1)/%.o $(TESTLIB) $(BUILD)/librlc.a
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS)

$(BUILD)/bench/bench_%_$(1): $(BUILD)/obj/bench/bench_%.o $(BUILD)/obj/isa-$(1)/%.o $(BUILD)/librlc.a
	@mkdir -p $$(dir $$@)
	$$(CC) $$(CFLAGS) $$(LDFLAGS) -o $$@ $$^ $$(LDLIBS)
endef
$(foreach i,$(KERNEL_ISAS),$(eval $(call ISA_RULES,$(i))))

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(BUILD)/librlc.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(BUILD)/librlc.a $(LDLIBS)

# Runs every test binary and tests/*.sh; the last line is "N passed, N failed".
test: all
	RLC_BUILD=$(BUILD) RLC_SAN=$(SAN) tests/run.sh

# DEMO_ARGS: extra options, e.g. `make demo DEMO_ARGS="--quick --out /tmp/demo"` (a few minutes less; the README test).
demo: $(BUILD)/rlc
	$(BUILD)/rlc demo $(DEMO_ARGS)

# `make install PREFIX=DIR` (default /usr/local; DESTDIR for staging): the binary, its docs, and the example configs
# (the demo finds its config there, relative to the binary).
PREFIX  ?= /usr/local
install: $(BUILD)/rlc
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/doc/rlc/docs $(DESTDIR)$(PREFIX)/share/rlc
	install -m 755 $(BUILD)/rlc $(DESTDIR)$(PREFIX)/bin/rlc
	install -m 644 README.md DEVELOPERS.md $(DESTDIR)$(PREFIX)/share/doc/rlc/
	install -m 644 $(wildcard docs/*.md) $(DESTDIR)$(PREFIX)/share/doc/rlc/docs/
	rm -rf $(DESTDIR)$(PREFIX)/share/rlc/examples && cp -R examples $(DESTDIR)$(PREFIX)/share/rlc/examples
	@echo "installed $(DESTDIR)$(PREFIX)/bin/rlc, docs in $(DESTDIR)$(PREFIX)/share/doc/rlc, examples in $(DESTDIR)$(PREFIX)/share/rlc/examples"

clean:
	rm -rf build build-san build-fuzz

include fuzz/fuzz.mk

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
