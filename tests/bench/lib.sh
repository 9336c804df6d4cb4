# tests/bench/lib.sh: what the bench scripts share; sourced, not run.

# A port for a server, chosen at random where nothing listens: by default from 10000 up to the
# ephemeral range (a port there is never taken by a client's connect(), and a port a client's
# TIME_WAIT still holds cannot be bound by a server without SO_REUSEADDR); with PORT_BASE=N from
# N to N + PORT_SPAN - 1 (PORT_SPAN 1000): on a shared host, a block of ports of your own
# (docs/bench.md, "Ports"). Prints the port, or a line on stderr and returns 1.
low_port() {
    local lo base span p
    lo=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
    base=${PORT_BASE:-10000}
    span=${PORT_SPAN:-$([ -n "${PORT_BASE:-}" ] && echo 1000 || echo $((lo > 12000 ? lo - 10000 : 2000)))}
    case $base$span in *[!0-9]* | "")
        echo "PORT_BASE=$base PORT_SPAN=$span: both are numbers (PORT_BASE=20000 PORT_SPAN=1000)" >&2
        return 1 ;;
    esac
    if [ "$base" -lt 1024 ] || [ "$span" -lt 1 ] || [ "$span" -gt 30000 ] ||
        [ $((base + span - 1)) -gt 65535 ]; then
        echo "PORT_BASE=$base PORT_SPAN=$span: the ports must lie within 1024-65535 (span 1-30000)" >&2
        return 1
    fi
    for _ in $(seq 100); do
        p=$((base + (RANDOM * 32768 + RANDOM) % span))
        listening "$p" || { echo "$p"; return 0; }
    done
    echo "low_port: nothing free found in $base-$((base + span - 1)) (PORT_BASE, PORT_SPAN)" >&2
    return 1
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
