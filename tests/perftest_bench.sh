#!/bin/sh
# Runs the seven perftests on $OXE_DEV (client and server in this guest) and
# prints one line each: "pt <test> <value> <unit>" (bandwidth tests: average
# MB/s, atomics: Mpps, latency tests: typical µs).
. "$(dirname "$0")/lib.sh"
dev=${OXE_DEV:-oxe0}
port=19000
# A run perftest could not time (perftest_untimed) is run again, up to twice.
for t in ib_write_bw ib_read_bw ib_send_bw ib_atomic_bw ib_write_lat ib_read_lat ib_send_lat; do
	for try in 1 2 3; do
		port=$((port + 1))
		$t -d "$dev" -p $port >/tmp/pt-srv 2>&1 &
		srv=$!
		i=0
		while ! ss -ltn | grep -q ":$port " && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
		line=$($t -d "$dev" -p $port 10.77.0.1 2>/tmp/pt-cli | grep -E '^ +[0-9]+ +[0-9]+ ' | tail -1)
		wait $srv
		perftest_untimed /tmp/pt-cli || break
		echo "# $t: perftest could not time run $try (its clock rate sample failed)" >&2
		line=
	done
	pt_line $t $line
done
