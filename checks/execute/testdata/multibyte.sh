#!/bin/sh
# Three two-byte characters.
printf '\303\251\303\251\303\251'
