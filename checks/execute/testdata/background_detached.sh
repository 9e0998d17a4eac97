#!/bin/sh
# Leaves a child behind with its output redirected: it holds no pipe, so
# only killing the process group after the leader exits ends it.
sleep 1000 </dev/null >/dev/null 2>&1 &
echo "$$ $!"
