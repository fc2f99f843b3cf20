# teenycl -- build, test, install, bench, run.
#
#   make              libraries, tools and examples into build/
#   make test         install missing packages (as root), build, run the check suite
#   make test-full    the long sweeps too
#   make test-tools   teeny-info --check and examples/embed_app (also in make test)
#   make check-asan   the test suite under AddressSanitizer + UBSan
#   make check-oclgrind  the conformance suite under oclgrind (--data-races --uninitialized)
#   make check-matrix    the conformance suite and examples on PoCL, rusticl, PoCL 6.0 (Debian 13 chroot)
#   make fuzz         each libFuzzer target for FUZZ_SECONDS (default 60; clang)
#   make run          install, build and run the example on the default device
#   make bench        benchmarks on the default device (tools/teeny-bench)
#   make install PREFIX=/usr/local DESTDIR=   /   make uninstall
#   make WITH_MPI=1   also libteenycl_dist (MPI data parallelism, include/teenycl_dist.h),
#                     build/test_dist, and train_fashion_mnist with --dist
#   make test-dist    the MPI tests (mpirun -np 1/2/3; part of make test when mpicc and mpirun exist)

VERSION_MAJOR := 0
VERSION := 0.1.0
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
BUILD ?= build

CC ?= cc
CFLAGS ?= -O2 -g
WARN := -std=c11 -Wall -Wextra -Wpedantic
CPPFLAGS_ALL := -D_POSIX_C_SOURCE=200809L -Iinclude -Isrc $(CPPFLAGS)
CFLAGS_ALL := $(WARN) $(CFLAGS) -fPIC -fvisibility=hidden
LDLIBS_LIB := -lOpenCL -lm -lcjson -lz
CHECK_LIBS = $(shell pkg-config --libs check 2>/dev/null || echo -lcheck -lsubunit -lrt -lpthread -lm)
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer

# src/dist/ is the optional MPI layer (WITH_MPI=1), never in libteenycl
LIB_SRC := $(filter-out src/dist/%,$(wildcard src/*/*.c))
CL_SRC := $(wildcard cl/*.cl)
GEN := $(BUILD)/gen/kernels.c
LIB_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(LIB_SRC)) $(BUILD)/gen/kernels.o
TEST_SRC := $(filter-out tests/test_dist%,$(wildcard tests/*.c tests/ref/*.c)) tests/fuzz/fuzz_lib.c
TEST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(TEST_SRC))
TOOLS := $(BUILD)/teeny-info $(BUILD)/teeny-bench
BENCH_SRC := $(wildcard tools/bench_*.c)
EXAMPLES := $(patsubst examples/%.c,$(BUILD)/%,$(wildcard examples/*.c))
STATIC := $(BUILD)/libteenycl.a
SHARED := $(BUILD)/libteenycl.so.$(VERSION)
SONAME := libteenycl.so.$(VERSION_MAJOR)
HEADERS := include/teenycl.h $(wildcard src/*.h src/*/*.h src/ops/*.def src/tune/*.def)

# ---- the optional MPI layer (make WITH_MPI=1) ----------------------------
# src/dist/ on top of the public API, as a static libteenycl_dist.a that
# applications link before libteenycl and Open MPI (teenycl-mpi.pc);
# -DTEENY_WITH_MPI turns on train_fashion_mnist's --dist. Recursive
# variables: mpicc is asked only when an MPI target is built.
WITH_MPI ?= 0
MPICC ?= mpicc
MPIRUN ?= mpirun
MPI_CFLAGS = $(shell $(MPICC) --showme:compile 2>/dev/null || pkg-config --cflags ompi-c)
MPI_LIBS = $(shell $(MPICC) --showme:link 2>/dev/null || pkg-config --libs ompi-c)
DIST_SRC := $(wildcard src/dist/*.c)
DIST_OBJ := $(patsubst %.c,$(BUILD)/%.o,$(DIST_SRC))
DIST_LIB := $(BUILD)/libteenycl_dist.a
MPI_ON := $(filter 1,$(WITH_MPI))

# test settings: kernel builds are slow on PoCL; CK_FORK=no keeps OpenCL
# out of forked children.
TEST_ENV := CK_DEFAULT_TIMEOUT=1200 CK_FORK=no TEENY_BUILD_DIR=$(BUILD)

.PHONY: all lib tools examples test test-dist test-full check-asan check-oclgrind check-matrix check-install run bench install uninstall clean deps deps-test deps-run fuzz

all: lib tools examples $(if $(MPI_ON),$(DIST_LIB) $(BUILD)/test_dist)

lib: $(STATIC) $(SHARED)

tools: $(TOOLS)

examples: $(EXAMPLES)

$(GEN): $(CL_SRC) tools/embed-cl.sh
	@mkdir -p $(dir $@)
	sh tools/embed-cl.sh $@ $(CL_SRC)

$(BUILD)/%.o: %.c $(HEADERS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -c $< -o $@

$(BUILD)/gen/kernels.o: $(GEN)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -c $< -o $@

$(STATIC): $(LIB_OBJ)
	rm -f $@
	ar rcs $@ $^

$(SHARED): $(LIB_OBJ)
	$(CC) -shared -Wl,-soname,$(SONAME) -o $@ $^ $(LDFLAGS) $(LDLIBS_LIB)
	ln -sf libteenycl.so.$(VERSION) $(BUILD)/$(SONAME)
	ln -sf $(SONAME) $(BUILD)/libteenycl.so

$(BUILD)/teeny-info: tools/teeny-info.c $(STATIC) include/teenycl.h
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $< -o $@ $(STATIC) $(LDFLAGS) $(LDLIBS_LIB)

$(BUILD)/teeny-bench: tools/teeny-bench.c $(BENCH_SRC) tools/bench.h $(STATIC) include/teenycl.h
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) tools/teeny-bench.c $(BENCH_SRC) -o $@ $(STATIC) $(LDFLAGS) $(LDLIBS_LIB)

$(BUILD)/%: examples/%.c $(STATIC) include/teenycl.h
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) $< -o $@ $(STATIC) $(LDFLAGS) $(LDLIBS_LIB)

# MPI: the dist layer, its test program, and the example with --dist.
# with_mpi.stamp holds the WITH_MPI the example was last built with and
# changes only when that does, so toggling WITH_MPI rebuilds the example.
$(BUILD)/with_mpi.stamp: FORCE
	@mkdir -p $(BUILD); if [ "$$(cat $@ 2>/dev/null)" != "$(WITH_MPI)" ]; then echo "$(WITH_MPI)" > $@; fi

$(DIST_OBJ): $(BUILD)/%.o: %.c include/teenycl.h include/teenycl_dist.h
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS_ALL) $(MPI_CFLAGS) $(CFLAGS_ALL) -c $< -o $@

$(DIST_LIB): $(DIST_OBJ)
	rm -f $@
	ar rcs $@ $^

$(BUILD)/test_dist: tests/test_dist.c $(DIST_LIB) $(STATIC) include/teenycl.h include/teenycl_dist.h
	$(CC) $(CPPFLAGS_ALL) -DTEENY_WITH_MPI $(MPI_CFLAGS) $(CFLAGS_ALL) $< -o $@ $(DIST_LIB) $(STATIC) $(LDFLAGS) $(LDLIBS_LIB) $(MPI_LIBS)

$(BUILD)/train_fashion_mnist: examples/train_fashion_mnist.c examples/fashion_net.h $(STATIC) include/teenycl.h \
    include/teenycl_dist.h $(BUILD)/with_mpi.stamp $(if $(MPI_ON),$(DIST_LIB))
	$(CC) $(CPPFLAGS_ALL) $(if $(MPI_ON),-DTEENY_WITH_MPI $(MPI_CFLAGS)) $(CFLAGS_ALL) $< -o $@ \
	    $(if $(MPI_ON),$(DIST_LIB)) $(STATIC) $(LDFLAGS) $(LDLIBS_LIB) $(if $(MPI_ON),$(MPI_LIBS))

.PHONY: FORCE
FORCE:

# the runner's main() registers the suites listed in tests/suites.def
$(BUILD)/tests/harness.o: tests/suites.def tests/harness.h

$(BUILD)/teeny-tests: $(TEST_OBJ) $(STATIC)
	$(CC) -o $@ $(TEST_OBJ) $(STATIC) $(LDFLAGS) $(CHECK_LIBS) $(LDLIBS_LIB)

deps:
	@sh tools/install-deps.sh

deps-test:
	@sh tools/install-deps.sh test

deps-run:
	@sh tools/install-deps.sh run

test: deps-test
	$(MAKE) all $(BUILD)/teeny-tests
	$(TEST_ENV) $(BUILD)/teeny-tests
	sh tests/test_tools.sh $(BUILD)
	$(MAKE) test-dist

# The MPI tests (tests/test_dist.sh: mpirun -np 1, 2, 3 on this machine's
# default device), built with WITH_MPI=1; when mpicc or mpirun is missing
# they are reported as not run, never as passed.
test-dist:
	@if command -v $(MPICC) >/dev/null 2>&1 && command -v $(MPIRUN) >/dev/null 2>&1; then \
	    $(MAKE) WITH_MPI=1 $(DIST_LIB) $(BUILD)/test_dist $(BUILD)/train_fashion_mnist && \
	    MPIRUN=$(MPIRUN) sh tests/test_dist.sh $(BUILD); \
	else echo "test_dist.sh: NOT RUN: $(MPICC) or $(MPIRUN) is missing (sh tools/install-deps.sh test installs Open MPI)"; fi

# teeny-info (--check with injected build failures, crashes and hangs) and
# examples/embed_app; part of make test.
.PHONY: test-tools
test-tools: all
	sh tests/test_tools.sh $(BUILD)

test-full: deps-test
	$(MAKE) all $(BUILD)/teeny-tests
	$(TEST_ENV) TEENY_TEST_FULL=1 $(BUILD)/teeny-tests

# tools/lsan-retry.sh reruns the suite only when LeakSanitizer's own tracer
# crashed at exit after every check passed (an intermittent sanitizer fault).
# Mesa's rusticl ICD (installed by check-matrix) leaks at load, from a
# module LSan cannot name: the sanitizer run loads PoCL's ICD alone.
ASAN_ICD = $(if $(wildcard /etc/OpenCL/vendors/pocl.icd),OCL_ICD_VENDORS=/etc/OpenCL/vendors/pocl.icd)
check-asan: deps-test
	$(MAKE) BUILD=build-asan CFLAGS="-O1 -g $(SAN)" LDFLAGS="$(SAN)" build-asan/teeny-tests
	$(TEST_ENV) TEENY_TEST_SKIP=example ASAN_OPTIONS=detect_leaks=1 $(ASAN_ICD) \
	    $(FUZZ_ENV) LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 sh tools/lsan-retry.sh build-asan/teeny-tests

# The conformance suite (one tiny case per kernel variant; it fails unless
# every __kernel of the embedded sources was launched) under oclgrind with
# --data-races and --uninitialized. Barrier divergence needs no option:
# oclgrind 21.10 always reports it ("Work-group divergence detected").
# -cl-opt-disable: oclgrind 21.10's --uninitialized plugin aborts any kernel
# holding LLVM's `freeze` instruction ("Unsupported instruction: freeze"),
# which the optimizer emits, and the kernel then silently does not run.
# The library works around two more bugs of that plugin on this device
# (ctx->kernel_stores: src/core/simulator.c).
# OCLGRIND_SUITES="conformance conv2d ..." adds whole family suites (in
# small mode; several take many minutes each under both plugins).
OCLGRIND_SUITES ?= conformance
check-oclgrind:
	@sh tools/install-deps.sh oclgrind
	$(MAKE) $(BUILD)/teeny-tests
	rm -f $(BUILD)/oclgrind.log
	$(TEST_ENV) TEENY_TEST_SMALL=1 TEENY_NO_CACHE=1 TEENY_DEVICE=oclgrind TEENY_TEST_SUITES="$(OCLGRIND_SUITES)" \
	    oclgrind --data-races --uninitialized --check-api --build-options -cl-opt-disable --log $(BUILD)/oclgrind.log $(BUILD)/teeny-tests
	@if [ -s $(BUILD)/oclgrind.log ]; then cat $(BUILD)/oclgrind.log; echo "oclgrind reported the problems above"; exit 1; fi
	@echo "oclgrind: no errors reported"

# The portability matrix: the conformance suite (own and generic tuning)
# and the examples on host PoCL, Mesa rusticl/llvmpipe and PoCL 6.0 in a
# Debian 13 chroot cached in MATRIX_CACHE (tools/check-matrix.sh; root).
# MATRIX_LEGS="pocl rusticl" picks legs.
MATRIX_LEGS ?=
check-matrix:
	BUILD=$(BUILD) bash tools/check-matrix.sh $(MATRIX_LEGS)


# EPOCHS=N runs N epochs (default: 15 on a GPU, fewer on a CPU; the
# program says so). ARGS passes anything else, e.g. ARGS="--device pocl".
EPOCHS ?=
ARGS ?=
run: deps-run
	$(MAKE) all
	$(BUILD)/teeny-info --no-self-test
	$(BUILD)/train_fashion_mnist $(if $(EPOCHS),--epochs $(EPOCHS)) --out runs/fashion $(ARGS)

bench: all
	$(BUILD)/teeny-bench

$(BUILD)/teenycl.pc: Makefile
	@mkdir -p $(BUILD)
	printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: teenycl\nDescription: portable OpenCL compute backend for small neural networks\nVersion: %s\nRequires.private: OpenCL\nCflags: -I$${includedir}\nLibs: -L$${libdir} -lteenycl\nLibs.private: -lOpenCL -lm -lcjson -lz\n' \
	    '$(PREFIX)' '$(LIBDIR)' '$(INCLUDEDIR)' '$(VERSION)' > $@

# WITH_MPI=1: the dist layer's header, libteenycl_dist.a and teenycl-mpi.pc
# (Cflags -DTEENY_WITH_MPI; Requires teenycl and Open MPI's ompi-c).
$(BUILD)/teenycl-mpi.pc: Makefile
	@mkdir -p $(BUILD)
	printf 'prefix=%s\nlibdir=%s\nincludedir=%s\n\nName: teenycl-mpi\nDescription: teenycl data-parallel training over MPI (teenycl_dist.h)\nVersion: %s\nRequires: teenycl ompi-c\nCflags: -I$${includedir} -DTEENY_WITH_MPI\nLibs: -L$${libdir} -lteenycl_dist\n' \
	    '$(PREFIX)' '$(LIBDIR)' '$(INCLUDEDIR)' '$(VERSION)' > $@

install: lib $(BUILD)/teenycl.pc $(if $(MPI_ON),$(DIST_LIB) $(BUILD)/teenycl-mpi.pc)
	install -d $(DESTDIR)$(INCLUDEDIR) $(DESTDIR)$(LIBDIR)/pkgconfig
	install -m 644 include/teenycl.h $(DESTDIR)$(INCLUDEDIR)/teenycl.h
	install -m 644 $(STATIC) $(DESTDIR)$(LIBDIR)/libteenycl.a
	install -m 755 $(SHARED) $(DESTDIR)$(LIBDIR)/libteenycl.so.$(VERSION)
	ln -sf libteenycl.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(LIBDIR)/libteenycl.so
	install -m 644 $(BUILD)/teenycl.pc $(DESTDIR)$(LIBDIR)/pkgconfig/teenycl.pc
	$(if $(MPI_ON),install -m 644 include/teenycl_dist.h $(DESTDIR)$(INCLUDEDIR)/teenycl_dist.h)
	$(if $(MPI_ON),install -m 644 $(DIST_LIB) $(DESTDIR)$(LIBDIR)/libteenycl_dist.a)
	$(if $(MPI_ON),install -m 644 $(BUILD)/teenycl-mpi.pc $(DESTDIR)$(LIBDIR)/pkgconfig/teenycl-mpi.pc)

uninstall:
	rm -f $(DESTDIR)$(INCLUDEDIR)/teenycl.h $(DESTDIR)$(LIBDIR)/libteenycl.a \
	    $(DESTDIR)$(LIBDIR)/libteenycl.so.$(VERSION) $(DESTDIR)$(LIBDIR)/$(SONAME) \
	    $(DESTDIR)$(LIBDIR)/libteenycl.so $(DESTDIR)$(LIBDIR)/pkgconfig/teenycl.pc
	rm -f $(DESTDIR)$(INCLUDEDIR)/teenycl_dist.h $(DESTDIR)$(LIBDIR)/libteenycl_dist.a \
	    $(DESTDIR)$(LIBDIR)/pkgconfig/teenycl-mpi.pc

# Install into a scratch DESTDIR, build a program against it through
# pkg-config (static and shared), run it, uninstall, and check that
# uninstall removed exactly what install put there. teeny-info calls OpenCL
# and libm itself (teeny-info --check), so its shared link names them too,
# as any application that does must.
check-install: all
	rm -rf $(BUILD)/destdir
	$(MAKE) install DESTDIR=$(CURDIR)/$(BUILD)/destdir PREFIX=/usr/local
	cd $(BUILD)/destdir && find . -type f -o -type l | sort > ../installed.txt
	PKG_CONFIG_SYSROOT_DIR=$(CURDIR)/$(BUILD)/destdir PKG_CONFIG_PATH=$(CURDIR)/$(BUILD)/destdir/usr/local/lib/pkgconfig \
	    sh -c '$(CC) -std=c11 tools/teeny-info.c -o $(BUILD)/info-shared $$(pkg-config --cflags --libs teenycl OpenCL) -lm && \
	           $(CC) -std=c11 tools/teeny-info.c -o $(BUILD)/info-static $$(pkg-config --cflags teenycl) \
	               $(CURDIR)/$(BUILD)/destdir/usr/local/lib/libteenycl.a $$(pkg-config --libs-only-l --static teenycl | sed s/-lteenycl//)'
	LD_LIBRARY_PATH=$(CURDIR)/$(BUILD)/destdir/usr/local/lib $(BUILD)/info-shared
	$(BUILD)/info-static --no-self-test
	$(MAKE) uninstall DESTDIR=$(CURDIR)/$(BUILD)/destdir PREFIX=/usr/local
	@left=$$(find $(BUILD)/destdir -type f -o -type l); if [ -n "$$left" ]; then echo "uninstall left: $$left"; exit 1; fi
	@bad=$$(nm -D --defined-only $(SHARED) | awk '{print $$3}' | grep -v '^teeny_' || true); \
	    if [ -n "$$bad" ]; then echo "exported symbols outside teeny_: $$bad"; exit 1; fi
	@echo "install check: ok ($$(wc -l < $(BUILD)/installed.txt) files installed and removed; only teeny_ symbols exported)"

# libFuzzer targets for the file loaders (tests/fuzz/fuzz_<format>.c), built
# with clang into build-fuzz/ and run one after another for FUZZ_SECONDS
# each, from seeds that make-fuzz-corpus writes with the library's own
# writers (build-fuzz/seeds/<format>); new inputs go to
# build-fuzz/corpus/<format>, crashes to build-fuzz/crash-*. The `fuzz`
# check suite (make test) replays seeds and seeded mutations without libFuzzer.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS := safetensors npy idx checkpoint
FUZZ_BUILD := build-fuzz
# PoCL only: the Mesa and Rusticl ICDs leak and throw C++ exceptions at load
FUZZ_ENV ?= $(if $(wildcard /etc/OpenCL/vendors/pocl.icd),OCL_ICD_VENDORS=/etc/OpenCL/vendors/pocl.icd)
FUZZ_CFLAGS := -O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer

$(BUILD)/make-fuzz-corpus: tests/fuzz/make_corpus.c tests/fuzz/fuzz_lib.c tests/fuzz/fuzz_lib.h $(STATIC)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) tests/fuzz/make_corpus.c tests/fuzz/fuzz_lib.c -o $@ $(STATIC) $(LDFLAGS) $(LDLIBS_LIB)

$(patsubst %,$(BUILD)/fuzz_%,$(FUZZ_TARGETS)): $(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c tests/fuzz/fuzz_target.h tests/fuzz/fuzz_lib.c tests/fuzz/fuzz_lib.h $(STATIC)
	$(CC) $(CPPFLAGS_ALL) $(CFLAGS_ALL) -fsanitize=fuzzer $< tests/fuzz/fuzz_lib.c -o $@ $(STATIC) $(LDFLAGS) $(LDLIBS_LIB)

fuzz: deps-test
	$(MAKE) BUILD=$(FUZZ_BUILD) CC=clang CFLAGS="$(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link" LDFLAGS="-fsanitize=address,undefined -Wl,--no-as-needed -lstdc++ -Wl,--as-needed" \
	    $(FUZZ_BUILD)/make-fuzz-corpus $(patsubst %,$(FUZZ_BUILD)/fuzz_%,$(FUZZ_TARGETS))
	rm -rf $(FUZZ_BUILD)/seeds
	$(FUZZ_ENV) ASAN_OPTIONS=detect_leaks=0 $(FUZZ_BUILD)/make-fuzz-corpus $(FUZZ_BUILD)/seeds
	@for t in $(FUZZ_TARGETS); do \
	    mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	    echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	    $(FUZZ_ENV) LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	    UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
	    $(FUZZ_BUILD)/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -timeout=30 -rss_limit_mb=4096 \
	        -print_final_stats=1 -artifact_prefix=$(FUZZ_BUILD)/crash-$$t- \
	        $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/seeds/$$t || exit 1; \
	done

clean:
	rm -rf build build-*
