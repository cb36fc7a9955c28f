package snapshots

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgelink/edgelink/shared/snapshot"
)

// Keep is how many published snapshots the bucket retains: the newest ones,
// so an edge fetching while a newer one lands still finds its object.
const Keep = 3

// BucketConfig is the object store bucket's configuration.
func BucketConfig(replicas int) jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{
		Bucket:      snapshot.Bucket,
		Description: "edgelink edge snapshots, newest by name",
		Storage:     jetstream.FileStorage,
		Replicas:    max(replicas, 1),
	}
}

// bucket opens the snapshot bucket. replicas > 0 creates it or sets its
// replicas; 0 keeps an existing bucket as it is (an operator's one-off
// publish must not scale a cluster's 3 copies down to 1) and creates a
// missing one with 1.
func bucket(ctx context.Context, js jetstream.JetStream, replicas int) (jetstream.ObjectStore, error) {
	if replicas > 0 {
		return js.CreateOrUpdateObjectStore(ctx, BucketConfig(replicas))
	}
	obs, err := js.ObjectStore(ctx, snapshot.Bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		obs, err = js.CreateObjectStore(ctx, BucketConfig(1))
		if errors.Is(err, jetstream.ErrBucketExists) {
			obs, err = js.ObjectStore(ctx, snapshot.Bucket)
		}
	}
	return obs, err
}

// Publish validates data as a snapshot, stores it in the bucket under its
// version's name and deletes all but the newest Keep snapshots.
func Publish(ctx context.Context, js jetstream.JetStream, data []byte, replicas int) (string, error) {
	snap, err := snapshot.Open(data)
	if err != nil {
		return "", fmt.Errorf("publish: refusing an invalid snapshot: %w", err)
	}
	obs, err := bucket(ctx, js, replicas)
	if err != nil {
		return "", fmt.Errorf("publish: object store: %w", err)
	}
	name := snapshot.ObjectName(snap.Header.ChangeVersion)
	meta := jetstream.ObjectMeta{
		Name: name,
		Metadata: map[string]string{
			"change-version": strconv.FormatUint(snap.Header.ChangeVersion, 10),
			"stream-seq":     strconv.FormatUint(snap.Header.StreamSeq, 10),
			"entries":        strconv.FormatUint(snap.Header.Entries, 10),
		},
	}
	if _, err := obs.Put(ctx, meta, bytes.NewReader(data)); err != nil {
		return "", fmt.Errorf("publish: put %s: %w", name, err)
	}
	if err := prune(ctx, obs); err != nil {
		return name, fmt.Errorf("publish: prune: %w", err)
	}
	return name, nil
}

func prune(ctx context.Context, obs jetstream.ObjectStore) error {
	infos, err := obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var versions []uint64
	for _, info := range infos {
		if v, ok := snapshot.ParseObjectName(info.Name); ok && !info.Deleted {
			versions = append(versions, v)
		}
	}
	if len(versions) <= Keep {
		return nil
	}
	slices.SortFunc(versions, func(a, b uint64) int { return cmp.Compare(b, a) }) // newest first
	for _, v := range versions[Keep:] {
		if err := obs.Delete(ctx, snapshot.ObjectName(v)); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return err
		}
	}
	return nil
}
