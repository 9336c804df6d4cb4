# tests/bench/lib.sh: what the bench scripts share; sourced, not run.

# A random port below the ephemeral range: a port a client's TIME_WAIT still holds cannot be
# bound by a server without SO_REUSEADDR.
low_port() {
    local lo
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
    echo $((10000 + RANDOM % (lo > 12000 ? lo - 10000 : 2000)))
}

# listening PORT: a TCP socket listens on it (from /proc: no ss on minimal hosts).
listening() {
    awk -v p="$(printf ':%04X' "$1")" '$4 == "0A" && substr($2, length($2) - 4) == p {f = 1}
        END {exit !f}' /proc/net/tcp /proc/net/tcp6
}

# wait_listening PORT: up to 10 s; non-zero if nothing listens by then.
wait_listening() {
    for _ in $(seq 200); do listening "$1" && return 0; sleep 0.05; done
    return 1
}

# interleave OUT FN A B: REPS repetitions of FN A and FN B, the order swapped every repetition
# (so that drift within a pair favours neither); each line FN prints is appended to OUT and shown.
interleave() {
    local out=$1 fn=$2 a=$3 b=$4 rep x
    for rep in $(seq "$REPS"); do
        for x in $([ $((rep % 2)) = 1 ] && echo "$a $b" || echo "$b $a"); do
            "$fn" "$x" >>"$out"
            tail -n1 "$out"
        done
    done
}
