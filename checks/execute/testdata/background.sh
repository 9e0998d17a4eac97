#!/bin/sh
# Leaves a child behind that holds stdout open and never exits.
sleep 1000 &
echo "$$ $!"
