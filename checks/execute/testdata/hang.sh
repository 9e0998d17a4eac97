#!/bin/sh
# Prints its own pid and its child's, then waits for the child (forever).
# With an argument, also writes them to that file, so a test knows it started.
sleep 300 &
echo "$$ $!"
if [ -n "$1" ]; then echo "$$ $!" > "$1"; fi
wait
