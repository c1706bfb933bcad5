#!/bin/sh
echo "ce helper"
