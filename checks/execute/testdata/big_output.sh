#!/bin/sh
# Prints 10 MB.
head -c 10000000 /dev/zero | tr '\0' x
