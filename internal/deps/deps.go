package deps

import (
	_ "github.com/docker/docker/client"
	_ "github.com/jezek/xgb"
	_ "github.com/jezek/xgb/shm"
	_ "github.com/jezek/xgb/xtest"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/valyala/fasthttp"
	_ "github.com/vmihailenco/msgpack/v5"
	_ "github.com/zeebo/xxh3"
	_ "golang.org/x/sync/errgroup"
	_ "golang.org/x/sync/semaphore"
	_ "golang.org/x/sys/unix"
)
