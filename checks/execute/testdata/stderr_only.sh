#!/bin/sh
echo "problem on stderr" >&2
exit 2
