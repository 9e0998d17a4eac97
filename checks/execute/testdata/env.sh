#!/bin/sh
echo "$UNYO_TEST_VAR $(pwd)"
