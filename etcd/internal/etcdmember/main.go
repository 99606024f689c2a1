// Command etcdmember runs one etcd member (go.etcd.io/etcd/server/v3
// embed) on loopback, for the tests and benchmarks of this module, which
// start three of them as processes of their own so that a member can be
// killed (SIGKILL) or paused (SIGSTOP) for real. It prints "ready" on
// stdout once the member serves, and stops cleanly on SIGTERM or SIGINT.
//
//	etcdmember -name m0 -data-dir DIR -client http://127.0.0.1:P -peer http://127.0.0.1:Q \
//		-initial-cluster m0=http://127.0.0.1:Q,m1=...
package main

import (
	"flag"
	"fmt"
	"log"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

func main() {
	name := flag.String("name", "m0", "member name")
	dir := flag.String("data-dir", "", "data directory")
	client := flag.String("client", "", "client URL to listen on and advertise")
	peer := flag.String("peer", "", "peer URL to listen on and advertise")
	initial := flag.String("initial-cluster", "", "NAME=PEERURL,... of every member")
	token := flag.String("token", "kvtest", "initial cluster token")
	state := flag.String("state", "new", "initial cluster state: new or existing")
	tick := flag.Uint("tick-ms", 50, "heartbeat interval")
	election := flag.Uint("election-ms", 500, "election timeout")
	flag.Parse()

	cfg := embed.NewConfig()
	cfg.Name, cfg.Dir = *name, *dir
	cu, err := url.Parse(*client)
	if err != nil {
		log.Fatal(err)
	}
	pu, err := url.Parse(*peer)
	if err != nil {
		log.Fatal(err)
	}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster, cfg.InitialClusterToken, cfg.ClusterState = *initial, *token, *state
	cfg.TickMs, cfg.ElectionMs = *tick, *election
	cfg.LogLevel = "warn"
	cfg.LogOutputs = []string{"stderr"}
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		log.Fatal(err)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		log.Fatal(err)
	case <-sig:
		e.Close()
		return
	case <-time.After(2 * time.Minute):
		log.Fatal("etcdmember: not ready after 2 minutes")
	}
	select {
	case <-sig:
	case err := <-e.Err():
		log.Fatal(err)
	}
	e.Close()
}
