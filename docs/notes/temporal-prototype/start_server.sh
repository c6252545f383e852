#!/bin/sh
# usage: start_server.sh PORT  -> starts dev server in background, prints pid, waits until ready
PORT=${1:-17233}
T=/tmp/temporal
$T/venv/bin/temporal server start-dev --headless --port $PORT --ip 127.0.0.1 \
  --log-level error \
  --search-attribute InterludePending=Bool \
  --search-attribute InterludeInterruptNames=KeywordList \
  --search-attribute InterludeAgent=Keyword \
  --search-attribute InterludeDeadline=Datetime \
  > $T/server-$PORT.log 2>&1 &
echo $! > $T/server-$PORT.pid
echo "pid $(cat $T/server-$PORT.pid)"
