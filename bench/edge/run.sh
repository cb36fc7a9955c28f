#!/bin/sh
# Runs the edge load benchmark; installs wrk with apt-get when it is missing.
set -eu
if ! command -v wrk >/dev/null 2>&1; then
	apt-get install -y wrk || { apt-get update && apt-get install -y wrk; }
fi
cd "$(dirname "$0")/../.."
go build -o /tmp/edgelink-bench-edge ./bench/edge
exec /tmp/edgelink-bench-edge "$@"
