// What differs from the other pinned versions' scheduling framework (see ../main.go).
package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	podutil "k8s.io/kubernetes/pkg/api/pod"
	api "k8s.io/kubernetes/pkg/apis/core"
	apiv1 "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/scheduler"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/profile"
)

// kubeVersion names the framework this harness is built against.
const kubeVersion = "v1.37.2"

// oracleScheduler keeps the node snapshot it gave scheduler.New: since v1.36 the
// scheduling cycle (schedulingCycle), not SchedulePod, refreshes it from the cache.
type oracleScheduler struct {
	*scheduler.Scheduler
	snapshot *internalcache.Snapshot
}

func newScheduler(ctx context.Context, client clientset.Interface, factory informers.SharedInformerFactory, recorders profile.RecorderFactory) (*oracleScheduler, error) {
	snapshot := internalcache.NewEmptySnapshot()
	sched, err := scheduler.New(ctx, client, factory, nil, recorders, scheduler.WithNodeInfoSnapshot(snapshot))
	if err != nil {
		return nil, err
	}
	return &oracleScheduler{Scheduler: sched, snapshot: snapshot}, nil
}

// schedulePod refreshes the snapshot as schedulingCycle does, then asks SchedulePod, which
// takes the queued pod's info since v1.36 (no PodSignature: OpportunisticBatching is off).
func (s *oracleScheduler) schedulePod(ctx context.Context, prof framework.Framework, state fwk.CycleState, pod *v1.Pod) (scheduler.ScheduleResult, error) {
	if err := s.Cache.UpdateSnapshot(klog.FromContext(ctx), s.snapshot); err != nil {
		return scheduler.ScheduleResult{}, err
	}
	info, err := framework.NewPodInfo(pod)
	if err != nil {
		return scheduler.ScheduleResult{}, err
	}
	return s.SchedulePod(ctx, prof, state, &framework.QueuedPodInfo{PodInfo: info})
}

// defaultOnCreate applies what the pod strategy's PrepareForCreate adds to SetDefaults_Pod
// since v1.37 (PodLevelResourcesFixDefaulting, beta and on): pod-level requests (and
// limits) defaulted from the containers' and the pod-level limits.
func defaultOnCreate(pod *v1.Pod) error {
	if pod.Spec.Resources == nil {
		return nil
	}
	internal := &api.Pod{}
	if err := apiv1.Convert_v1_Pod_To_core_Pod(pod, internal, nil); err != nil {
		return err
	}
	podutil.DefaultPodLevelResources(internal)
	out := &v1.Pod{}
	if err := apiv1.Convert_core_Pod_To_v1_Pod(internal, out, nil); err != nil {
		return err
	}
	pod.Spec.Resources = out.Spec.Resources
	return nil
}
