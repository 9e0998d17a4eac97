#!/bin/sh
# Exits with the status given as $1, as a plugin would.
echo "exit $1"
exit "$1"
