#!/bin/sh
kill -KILL $$
