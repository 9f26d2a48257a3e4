package etcdstore

import (
	"context"
	"time"

	"github.com/hetsched/hetsched/internal/store"
)

// etcd's quota (its --quota-backend-bytes; 8 GiB for an embedded member)
// is the store's "disk": past it etcd refuses every write, the engine's
// own included, until it is defragmented and its alarm disarmed. So, as
// the Pebble store does at its disk reserve, a leader's store reports
// Space.Low once the fullest member has less than the reserve left under
// its quota, and the engine then refuses new work (507) while its own
// small commits, cancels and completions go on. A member whose database
// could give back half the reserve is defragmented then.

// DefaultSpaceEvery is how often a leader reads its members' sizes.
const DefaultSpaceEvery = 5 * time.Second

// quotaReserve is the reserve under a quota: a tenth of it, at least 256
// MiB, at most half of it.
func quotaReserve(quota int64) int64 {
	return min(max(quota/10, 256<<20), quota/2)
}

// Space is the fullest member's room under its quota (zero, not Low,
// before the first reading or when etcd reports no quota).
func (s *Store) Space() store.Space {
	if sp := s.space.Load(); sp != nil {
		return *sp
	}
	return store.Space{}
}

// watchSpace reads the members' sizes every SpaceEvery until ctx ends.
func (s *Store) watchSpace(ctx context.Context) {
	defer s.wg.Done()
	tick := time.NewTicker(s.opt.SpaceEvery)
	defer tick.Stop()
	for {
		s.readSpace(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// readSpace reads every member's size and quota and keeps the fullest
// member's room; a member that could give back half the reserve while
// below it is defragmented.
func (s *Store) readSpace(ctx context.Context) {
	var worst *store.Space
	var last error
	for _, ep := range s.cli.Endpoints() {
		tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := s.cli.Status(tctx, ep)
		cancel()
		if err != nil {
			last = err
			continue
		}
		quota := st.DbSizeQuota
		if quota <= 0 {
			continue
		}
		reserve := quotaReserve(quota)
		free := max(quota-st.DbSize, 0)
		sp := store.Space{Free: uint64(free), Total: uint64(quota), Reserve: uint64(reserve), Low: free < reserve}
		if sp.Low && st.DbSize-st.DbSizeInUse >= reserve/2 && s.opt.DefragMinFree >= 0 {
			dctx, cancel := context.WithTimeout(ctx, time.Minute)
			_, err := s.cli.Defragment(dctx, ep)
			cancel()
			s.log.Warn("etcd store: a member is near its quota: defragmented it", "endpoint", ep, "size", st.DbSize, "in_use", st.DbSizeInUse, "quota", quota, "err", err)
		}
		if worst == nil || sp.Free < worst.Free {
			worst = &sp
		}
	}
	if worst == nil {
		old := s.Space()
		old.Err = last
		s.space.Store(&old)
		return
	}
	if prev := s.Space(); prev.Low != worst.Low {
		s.log.Warn("etcd store: room under the quota", "low", worst.Low, "free", worst.Free, "reserve", worst.Reserve, "quota", worst.Total)
	}
	s.space.Store(worst)
}
