package main

import (
	_ "github.com/alecthomas/kong"
	_ "github.com/beanstalkd/go-beanstalk"
	_ "github.com/cockroachdb/pebble/v2"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/google/uuid"
	_ "github.com/netresearch/go-cron"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/redis/rueidis"
	_ "go.uber.org/goleak"
	_ "golang.org/x/sync/errgroup"
)

func main() {}
