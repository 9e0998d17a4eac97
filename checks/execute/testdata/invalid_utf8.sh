#!/bin/sh
printf 'bad \377\376 bytes\n'
