package main
import (
 _ "github.com/cockroachdb/pebble/v2"
 _ "github.com/redis/rueidis"
 _ "github.com/alecthomas/kong"
 _ "github.com/prometheus/client_golang/prometheus"
 _ "github.com/netresearch/go-cron"
 _ "github.com/google/go-cmp/cmp"
 _ "go.uber.org/goleak"
 _ "golang.org/x/sync/errgroup"
 _ "github.com/beanstalkd/go-beanstalk"
 _ "github.com/google/uuid"
)
func main(){}
