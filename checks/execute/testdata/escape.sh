#!/bin/sh
# Leaves a child behind in a new session (outside the process group) that
# holds stdout open.
setsid sleep 1000 &
# Exit only once the child has its own session (its session id is its pid);
# until then the group kill after we exit would still reach it.
i=0
while [ "$(cut -d' ' -f6 "/proc/$!/stat" 2>/dev/null)" != "$!" ] && [ $i -lt 1000 ]; do
	sleep 0.01
	i=$((i + 1))
done
echo "$$ $!"
