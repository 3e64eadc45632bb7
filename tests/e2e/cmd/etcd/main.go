// Command etcd is etcd's own server entry point, built at the release Kubernetes 1.33 pins.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
