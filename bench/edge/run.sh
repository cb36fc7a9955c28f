#!/bin/sh
# The edge's redirect benchmark, now part of the suite (bench/suite): the
# edge beside a bare fasthttp constant 302 and the other baselines, over
# 1,000,000 links (Zipf s=1.1, 10% unknown codes), in requests per server
# CPU-second. Installs wrk, nginx and redis-server with apt-get when missing.
set -eu
cd "$(dirname "$0")/../.."
exec go tool task bench -- -scenarios redirect "$@"
