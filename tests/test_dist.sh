#!/bin/sh
# test_dist.sh -- the MPI tests (include/teenycl_dist.h), run by `make test`
# (make test-dist) when mpicc and mpirun exist. Every rank runs on the
# default device (TEENY_DEVICE, else PoCL here) with one PoCL thread
# (POCL_MAX_PTHREAD_COUNT=1: 2 or 3 ranks share 2 cores), under
# `mpirun --oversubscribe` and a `timeout`, so nothing can hang.
#
#   grads  -np 1, 2, 3   averaged gradient == one process's full-batch
#                        gradient within 1e-6 normalized RMS, same bits on
#                        every rank
#   train  -np 1, 2, 3   20 AdamW steps over 6 global shards: the weights
#                        rank 0 writes are byte-identical across 1, 2, 3 ranks
#   fault  -np 2, 3      an injected failure on the last rank: every rank's
#                        all-reduce returns TEENY_ERR_STATE, the next step works
#   stall  -np 2, 3      the last rank 5 s late, 2 s deadline: every rank
#                        returns TEENY_ERR_IO, the job ends in time
#   crash  -np 3         the last rank exits mid-step: mpirun ends the job
#                        with a non-zero status within 30 s
#   syncbn -np 1, 2, 3   SyncBatchNorm (ranks with 6, {2, 4}, {1, 2, 3} rows)
#                        == single-process batch norm on the whole batch within
#                        1e-6 normalized RMS; a failing rank fails every rank
#   errors -np 1, 3      argument and agreement checks
#   mismatch -np 2, 3    the last rank in another collective than the others
#                        (or passing another exchanger, or other bytes to
#                        teeny_dist_check_same): an error status on every
#                        rank at once, never an abort or the deadline
#   faults -np 1         every OpenCL call and host allocation of the dist
#                        operations fails once, in turn: a status each time,
#                        then the same bits as a clean run
#   example -np 2        train_fashion_mnist --dist (when it was built with
#                        MPI and the data set is installed): one epoch line
#                        from rank 0, images/s for the job, a checkpoint
#   unlike -np 1+1       the example's ranks started with different --seed,
#                        --train-limit, --shards or --epochs, or reading a
#                        training set that differs in one byte: every rank
#                        names it and the job ends non-zero before training
#
# Usage: sh tests/test_dist.sh BUILD_DIR
set -u
build=${1:-build}
mpirun=${MPIRUN:-mpirun}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
passes=0
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

ok() {
    passes=$((passes + 1))
}

if ! command -v "$mpirun" >/dev/null 2>&1 || [ ! -x "$build/test_dist" ]; then
    echo "test_dist.sh: NOT RUN: $mpirun or $build/test_dist is missing (make WITH_MPI=1; sh tools/install-deps.sh test)"
    exit 1
fi

# root may run mpirun here (CI and the developers' machines run as root)
as_root=""
[ "$(id -u)" = 0 ] && as_root="--allow-run-as-root"

# mpi NAME NP LIMIT_S CMD...: output in $tmp/NAME.out, exit status in $rc
mpi() {
    name=$1 np=$2 limit=$3
    shift 3
    timeout "$limit" "$mpirun" --oversubscribe $as_root -np "$np" -x POCL_MAX_PTHREAD_COUNT=1 \
        "$@" > "$tmp/$name.out" 2>&1
    rc=$?
    if [ "$rc" -eq 124 ]; then
        fail "$name: still running after $limit s (hang); output:"
        sed 's/^/    /' "$tmp/$name.out"
    fi
}

# expect NAME NP MODE: exit status 0, NP "rank R: MODE: ok" lines, no FAIL line
expect() {
    name=$1 np=$2 mode=$3
    n=$(grep -c "^rank [0-9]*: $mode: ok" "$tmp/$name.out")
    if [ "$rc" -eq 0 ] && [ "$n" -eq "$np" ] && ! grep -q "FAIL" "$tmp/$name.out"; then ok; else
        fail "$name: exit status $rc, $n of $np ranks ok; output:"
        sed 's/^/    /' "$tmp/$name.out"
    fi
}

for np in 1 2 3; do
    mpi "grads-$np" "$np" 120 "$build/test_dist" grads
    expect "grads-$np" "$np" grads
done

for np in 1 2 3; do
    mpi "train-$np" "$np" 120 "$build/test_dist" train "$tmp/weights-$np.bin"
    expect "train-$np" "$np" train
done
for np in 2 3; do
    if [ -s "$tmp/weights-1.bin" ] && cmp -s "$tmp/weights-1.bin" "$tmp/weights-$np.bin"; then ok; else
        fail "train: the weights after 20 steps on $np ranks differ from 1 rank's (or are missing)"
    fi
done

for np in 2 3; do
    mpi "fault-$np" "$np" 120 "$build/test_dist" fault
    expect "fault-$np" "$np" fault
    mpi "stall-$np" "$np" 60 "$build/test_dist" stall 5
    expect "stall-$np" "$np" stall
done

# a rank that dies: mpirun ends every rank (non-zero), nothing hangs
start=$(date +%s)
mpi crash 3 60 "$build/test_dist" crash
took=$(($(date +%s) - start))
if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$took" -lt 30 ] && grep -q "^rank 2: crash: exiting" "$tmp/crash.out"; then ok; else
    fail "crash: exit status $rc after $took s, expected a non-zero status within 30 s; output:"
    sed 's/^/    /' "$tmp/crash.out"
fi

for np in 1 2 3; do
    mpi "syncbn-$np" "$np" 120 "$build/test_dist" syncbn
    expect "syncbn-$np" "$np" syncbn
done

for np in 1 3; do
    mpi "errors-$np" "$np" 120 "$build/test_dist" errors
    expect "errors-$np" "$np" errors
done

# ranks out of step: every rank returns an error at once, no abort
for np in 2 3; do
    mpi "mismatch-$np" "$np" 60 "$build/test_dist" mismatch
    expect "mismatch-$np" "$np" mismatch
done

mpi faults 1 120 "$build/test_dist" faults
expect faults 1 faults

# the example, on a small slice of Fashion-MNIST (2 ranks x 2 shards)
data=/usr/share/datasets/fashion-mnist
if [ -f "$data/train-images-idx3-ubyte.gz" ] && "$build/train_fashion_mnist" --dist --help 2>&1 | grep -q -- "--dist"; then
    mpi example 2 300 "$build/train_fashion_mnist" --dist --shards 4 --epochs 1 --batch 32 \
        --train-limit 256 --test-limit 64 --out "$tmp/run"
    if [ "$rc" -eq 0 ] && [ "$(grep -c '^epoch 1/1 ' "$tmp/example.out")" -eq 1 ] &&
        grep -q 'images_per_s [0-9]' "$tmp/example.out" && [ -s "$tmp/run/epoch_001.safetensors" ]; then ok; else
        fail "example: exit status $rc, expected one epoch line and a checkpoint; output:"
        sed 's/^/    /' "$tmp/example.out"
    fi
    # --resume on a different rank count: 1 rank continues the 2-rank run
    mpi resume 1 300 "$build/train_fashion_mnist" --dist --shards 4 --epochs 2 --batch 32 \
        --train-limit 256 --test-limit 64 --out "$tmp/run" --resume "$tmp/run/epoch_001.safetensors"
    if [ "$rc" -eq 0 ] && grep -q '^resumed from .* after epoch 1 of 2' "$tmp/resume.out" &&
        [ "$(grep -c '^epoch 2/2 ' "$tmp/resume.out")" -eq 1 ]; then ok; else
        fail "resume: exit status $rc; output:"
        sed 's/^/    /' "$tmp/resume.out"
    fi
    # ranks started with different options, or reading different data: every
    # rank says so and the job ends non-zero before training (rank 1 here
    # gets its own value: mpirun's MPMD form, "-np 1 A : -np 1 B")
    small="--dist --epochs 1 --batch 32 --train-limit 256 --test-limit 64 --out $tmp/unlike"
    for case in "--seed 1|--seed 2|--seed" "--train-limit 256|--train-limit 192|--train-limit" \
        "--shards 2|--shards 4|--shards" "--seed 1|--epochs 2|--epochs"; do
        a=${case%%|*} rest=${case#*|}
        b=${rest%%|*} opt=${rest#*|}
        # shellcheck disable=SC2086 # the options are words
        mpi unlike 1 120 "$build/train_fashion_mnist" $small $a : -np 1 "$build/train_fashion_mnist" $small $b
        n=$(grep -c "^error: rank [01]: the ranks were started with different options: .*$opt differs between rank 0 and rank 1" "$tmp/unlike.out")
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$n" -eq 2 ] && ! grep -q '^epoch ' "$tmp/unlike.out"; then ok; else
            fail "unlike options ($a against $b): exit status $rc, $n of 2 ranks named $opt; output:"
            sed 's/^/    /' "$tmp/unlike.out"
        fi
    done
    # rank 1 reads a copy of the training set with one byte changed
    mkdir -p "$tmp/data2"
    ln -sf "$data"/t10k-* "$tmp/data2/"
    { printf '\0\0\10\3\0\0\2\0\0\0\0\34\0\0\0\34\377'
      gunzip -c "$data/train-images-idx3-ubyte.gz" | tail -c +18 | head -c $((512 * 784 - 1)); } |
        gzip -1 > "$tmp/data2/train-images-idx3-ubyte.gz"
    { printf '\0\0\10\1\0\0\2\0'
      gunzip -c "$data/train-labels-idx1-ubyte.gz" | tail -c +9 | head -c 512; } |
        gzip -1 > "$tmp/data2/train-labels-idx1-ubyte.gz"
    # shellcheck disable=SC2086
    mpi unlike-data 1 300 "$build/train_fashion_mnist" $small : -np 1 "$build/train_fashion_mnist" $small \
        --data "$tmp/data2"
    n=$(grep -c "^error: rank [01]: the ranks' runs differ: .*the training images differs between rank 0 and rank 1" \
        "$tmp/unlike-data.out")
    if [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && [ "$n" -eq 2 ] && ! grep -q '^epoch ' "$tmp/unlike-data.out"; then ok; else
        fail "unlike data: exit status $rc, $n of 2 ranks said so; output:"
        sed 's/^/    /' "$tmp/unlike-data.out"
    fi
else
    echo "test_dist.sh: example NOT RUN: no Fashion-MNIST in $data or $build/train_fashion_mnist without --dist"
fi

echo "test_dist.sh: $passes checks passed, $failures failed"
[ "$failures" -eq 0 ]
