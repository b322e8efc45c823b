// What differs from the other pinned versions' scheduling framework (see ../main.go).
package main

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	clientset "k8s.io/client-go/kubernetes"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/profile"
)

// kubeVersion names the framework this harness is built against.
const kubeVersion = "v1.35.4"

type oracleScheduler struct {
	*scheduler.Scheduler
}

func newScheduler(ctx context.Context, client clientset.Interface, factory informers.SharedInformerFactory, recorders profile.RecorderFactory) (*oracleScheduler, error) {
	sched, err := scheduler.New(ctx, client, factory, nil, recorders)
	if err != nil {
		return nil, err
	}
	return &oracleScheduler{sched}, nil
}

// schedulePod: v1.35's SchedulePod takes the pod and refreshes the snapshot itself.
func (s *oracleScheduler) schedulePod(ctx context.Context, prof framework.Framework, state fwk.CycleState, pod *v1.Pod) (scheduler.ScheduleResult, error) {
	return s.SchedulePod(ctx, prof, state, pod)
}

// defaultOnCreate: v1.35 defaults pod-level requests in SetDefaults_Pod already.
func defaultOnCreate(*v1.Pod) error { return nil }
