#!/bin/sh
# A plugin that calls a program that is not installed: the shell says so on
# stderr and exits 127.
no_such_command_for_unyo_tests
