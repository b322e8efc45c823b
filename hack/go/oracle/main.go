// Command sched-oracle answers "where does kube-scheduler let this pod go, and what does
// it say when nowhere?" for scenarios read from stdin, using kube-scheduler's own code
// (k8s.io/kubernetes/pkg/scheduler at a pinned version: each <version>/ module here links
// this file and adds compat.go, what differs between the versions) in-process: the real Scheduler
// built by scheduler.New with the default profile from the config defaults, its cache fed
// the scenario's nodes and bound pods exactly as its informer handlers would, and its
// SchedulePod (PreFilter, Filter, FitError) and PostFilter (DefaultPreemption) run for
// each incoming pod. Nothing is bound or assumed: every incoming pod of a scenario is
// asked about the same cluster.
//
// Input: one JSON scenario per line,
//
//	{"namespaces": [Namespace], "claims": [PersistentVolumeClaim], "volumes": [PersistentVolume],
//	 "nodes": [Node], "pods": [Pod with spec.nodeName], "incoming": [Pod],
//	 "nominated": [pending Pod with status.nominatedNodeName],
//	 "deviceClasses": [DeviceClass], "resourceSlices": [ResourceSlice]}
//
// Nominated pods are pending pods another cycle (or another scheduler) nominated to a
// node: they sit in the scheduling queue's nominator, as kube-scheduler's pod informer puts
// them there, and the filters count those of equal or higher priority on their node
// (RunFilterPluginsWithNominatedPods). DeviceClasses and ResourceSlices are read by
// DynamicResources through its informers (DRA-backed extended resources: a class with
// spec.extendedResourceName).
//
// Objects are defaulted as the API server would store them (SetObjectDefaults_*, and for
// pods what the version's create strategy adds: compat.go's defaultOnCreate).
// Output: one JSON line per scenario, {"results": [...]} with, per incoming pod, the nodes
// that pass every filter, each other node's status (plugin and reasons), and, when no node
// fits, kube-scheduler's FailedScheduling message without and with the PostFilter part,
// the node DefaultPreemption nominates (if it would preempt) and every node where it
// could. For a pod that fits, the feasible nodes' scores as RunScorePlugins returns them
// (per plugin, normalised and multiplied by the plugin's weight).
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	resourceapi "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	apiv1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	"k8s.io/kubernetes/pkg/scheduler"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/profile"
)

type scenario struct {
	Namespaces []v1.Namespace              `json:"namespaces"`
	Claims     []v1.PersistentVolumeClaim  `json:"claims"`
	Volumes    []v1.PersistentVolume       `json:"volumes"`
	Nodes      []v1.Node                   `json:"nodes"`
	Pods       []v1.Pod                    `json:"pods"`
	Incoming   []v1.Pod                    `json:"incoming"`
	Nominated  []v1.Pod                    `json:"nominated"`
	Classes    []resourceapi.DeviceClass   `json:"deviceClasses"`
	Slices     []resourceapi.ResourceSlice `json:"resourceSlices"`
}

type nodeStatus struct {
	Code    string   `json:"code"`
	Plugin  string   `json:"plugin"`
	Reasons []string `json:"reasons"`
}

type result struct {
	Pod      string                `json:"pod"`
	Feasible []string              `json:"feasible"`
	Rejected map[string]nodeStatus `json:"rejected"`
	// FailedScheduling text: FitError without PostFilter, and as the event carries it.
	Message     string `json:"message"`
	FullMessage string `json:"fullMessage"`
	// DefaultPreemption's choice when it would preempt (then FullMessage == Message), and
	// each node where evicting lower-priority pods would make the pod fit.
	NominatedNode   string   `json:"nominatedNode,omitempty"`
	PreemptionNodes []string `json:"preemptionNodes,omitempty"`
	// A PostFilter plugin's error (its text ends FullMessage): "<plugin>: <message>".
	PostFilterError string `json:"postFilterError,omitempty"`
	// Feasible node -> plugin -> weighted normalised score.
	Scores map[string]map[string]int64 `json:"scores,omitempty"`
}

type answer struct {
	Results []result `json:"results"`
	Error   string   `json:"error,omitempty"`
}

func main() {
	if len(os.Args) == 2 && os.Args[1] == "--version" {
		fmt.Println(kubeVersion)
		return
	}
	klog.SetLogger(logr.Discard())
	// OpportunisticBatching (beta, on in v1.35) lets a later cycle try a node remembered
	// from an earlier one and stop there. It never changes which nodes are feasible, but
	// it would make the answer depend on the order of questions; off, every pod is asked
	// of every node.
	if err := utilfeature.DefaultMutableFeatureGate.Set("OpportunisticBatching=false"); err != nil {
		fatal(err)
	}
	in := bufio.NewReaderSize(os.Stdin, 1<<20)
	out := bufio.NewWriter(os.Stdout)
	encoder := json.NewEncoder(out)
	for {
		line, err := in.ReadBytes('\n')
		if len(line) > 0 {
			var sc scenario
			var ans answer
			if uerr := json.Unmarshal(line, &sc); uerr != nil {
				ans.Error = "decoding scenario: " + uerr.Error()
			} else if results, rerr := run(&sc); rerr != nil {
				ans.Error = rerr.Error()
			} else {
				ans.Results = results
			}
			if eerr := encoder.Encode(&ans); eerr != nil {
				fatal(eerr)
			}
			if ferr := out.Flush(); ferr != nil {
				fatal(ferr)
			}
		}
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			fatal(err)
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "sched-oracle:", err)
	os.Exit(1)
}

func run(sc *scenario) ([]result, error) {
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logr.Discard()))
	defer cancel()
	logger := klog.FromContext(ctx)

	// Namespaces come through the client (InterPodAffinity lists them for
	// namespaceSelector); nodes and bound pods go straight into the scheduler's cache, as
	// its informer handlers would put them.
	client := fake.NewClientset()
	for i := range sc.Namespaces {
		if _, err := client.CoreV1().Namespaces().Create(ctx, &sc.Namespaces[i], metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("namespace %s: %w", sc.Namespaces[i].Name, err)
		}
	}
	// VolumeBinding and VolumeZone read claims and volumes through their informers.
	for i := range sc.Volumes {
		pv := &sc.Volumes[i]
		apiv1defaults.SetObjectDefaults_PersistentVolume(pv)
		if _, err := client.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("persistentvolume %s: %w", pv.Name, err)
		}
	}
	for i := range sc.Claims {
		pvc := &sc.Claims[i]
		apiv1defaults.SetObjectDefaults_PersistentVolumeClaim(pvc)
		if _, err := client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("persistentvolumeclaim %s/%s: %w", pvc.Namespace, pvc.Name, err)
		}
	}
	for i := range sc.Classes {
		if _, err := client.ResourceV1().DeviceClasses().Create(ctx, &sc.Classes[i], metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("deviceclass %s: %w", sc.Classes[i].Name, err)
		}
	}
	for i := range sc.Slices {
		if _, err := client.ResourceV1().ResourceSlices().Create(ctx, &sc.Slices[i], metav1.CreateOptions{}); err != nil {
			return nil, fmt.Errorf("resourceslice %s: %w", sc.Slices[i].Name, err)
		}
	}
	// DefaultPreemption reads the incoming (and nominated) pods back through the informer.
	for _, pods := range [][]v1.Pod{sc.Nominated, sc.Incoming} {
		for i := range pods {
			pod := &pods[i] // defaulted in place: ask uses the incoming ones
			apiv1defaults.SetObjectDefaults_Pod(pod)
			if err := defaultOnCreate(pod); err != nil {
				return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
			if _, err := client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
				return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
			}
		}
	}
	factory := informers.NewSharedInformerFactory(client, 0)
	broadcaster := events.NewBroadcaster(&events.EventSinkImpl{Interface: client.EventsV1()})
	sched, err := newScheduler(ctx, client, factory, profile.NewRecorderFactory(broadcaster))
	if err != nil {
		return nil, fmt.Errorf("scheduler.New: %w", err)
	}
	factory.Start(ctx.Done())
	for informer, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("informer %v did not sync", informer)
		}
	}
	// The event handlers too: the pod handler puts pending pods into the scheduling queue
	// (nominated ones into its nominator) asynchronously; a handler still running while a
	// pod is asked about made the answer depend on timing.
	if err := sched.WaitForHandlersSync(ctx); err != nil {
		return nil, fmt.Errorf("event handlers did not sync: %w", err)
	}
	defer func() {
		cancel() // informers stop on the context; Shutdown waits for them
		factory.Shutdown()
		broadcaster.Shutdown()
	}()

	names := make([]string, 0, len(sc.Nodes))
	for i := range sc.Nodes {
		node := &sc.Nodes[i]
		apiv1defaults.SetObjectDefaults_Node(node)
		sched.Cache.AddNode(logger, node)
		names = append(names, node.Name)
	}
	sort.Strings(names)
	for i := range sc.Nominated {
		pod := &sc.Nominated[i]
		if pod.Spec.NodeName != "" || pod.Status.NominatedNodeName == "" {
			return nil, fmt.Errorf("nominated pod %s/%s needs status.nominatedNodeName and no spec.nodeName", pod.Namespace, pod.Name)
		}
		info, err := framework.NewPodInfo(pod)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		sched.SchedulingQueue.AddNominatedPod(logger, info, &fwk.NominatingInfo{
			NominatingMode: fwk.ModeOverride, NominatedNodeName: pod.Status.NominatedNodeName,
		})
	}
	for i := range sc.Pods {
		pod := &sc.Pods[i]
		apiv1defaults.SetObjectDefaults_Pod(pod)
		if err := defaultOnCreate(pod); err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue // kube-scheduler's pod informer selects status.phase!=Succeeded,Failed
		}
		if pod.Spec.NodeName == "" {
			return nil, fmt.Errorf("existing pod %s/%s has no spec.nodeName", pod.Namespace, pod.Name)
		}
		if err := sched.Cache.AddPod(logger, pod); err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}

	results := make([]result, 0, len(sc.Incoming))
	for i := range sc.Incoming {
		pod := &sc.Incoming[i]
		res, err := ask(ctx, sched, pod, names)
		if err != nil {
			return nil, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		results = append(results, res)
	}
	return results, nil
}

// ask runs one scheduling attempt for pod the way scheduleOne does, up to the decision.
func ask(ctx context.Context, sched *oracleScheduler, pod *v1.Pod, names []string) (result, error) {
	res := result{Pod: pod.Namespace + "/" + pod.Name, Rejected: map[string]nodeStatus{}}
	prof, ok := sched.Profiles[pod.Spec.SchedulerName]
	if !ok {
		return res, fmt.Errorf("no profile %q", pod.Spec.SchedulerName)
	}
	state := framework.NewCycleState()
	scheduled, err := sched.schedulePod(ctx, prof, state, pod)
	if err == nil {
		// The pod fits: SchedulePod reports how many nodes do, not which; ask each node
		// (PreFilter once, then every node's filters) and check the count agrees.
		feasible, rejected, scores, perr := filterEachNode(ctx, prof, pod, names)
		if perr != nil {
			return res, perr
		}
		res.Scores = scores
		if len(feasible) != scheduled.FeasibleNodes {
			return res, fmt.Errorf("per-node filters found %d feasible nodes, SchedulePod %d", len(feasible), scheduled.FeasibleNodes)
		}
		res.Feasible, res.Rejected = feasible, rejected
		return res, nil
	}
	var fitErr *framework.FitError
	if !errors.As(err, &fitErr) {
		if errors.Is(err, scheduler.ErrNoNodesAvailable) {
			res.Feasible = []string{}
			res.Message, res.FullMessage = err.Error(), err.Error()
			return res, nil
		}
		return res, err
	}
	res.Feasible = []string{}
	for _, name := range names {
		res.Rejected[name] = describe(fitErr.Diagnosis.NodeToStatus.Get(name))
	}
	res.Message = fitErr.Error()
	post, status := prof.RunPostFilterPlugins(ctx, state, pod, fitErr.Diagnosis.NodeToStatus)
	fitErr.Diagnosis.PostFilterMsg = status.Message()
	res.FullMessage = fitErr.Error()
	if status.Code() == fwk.Error {
		res.PostFilterError = status.Plugin() + ": " + status.Message()
	}
	if status.IsSuccess() && post != nil && post.NominatingInfo != nil {
		res.NominatedNode = post.NominatedNodeName
		// DefaultPreemption nominates one node; ask it about each node alone (the others
		// marked unresolvable) to learn every node where preemption would help.
		for _, name := range names {
			alone := framework.NewNodeToStatus(
				map[string]*fwk.Status{name: fitErr.Diagnosis.NodeToStatus.Get(name)},
				fwk.NewStatus(fwk.UnschedulableAndUnresolvable),
			)
			if _, st := prof.RunPostFilterPlugins(ctx, state, pod, alone); st.IsSuccess() {
				res.PreemptionNodes = append(res.PreemptionNodes, name)
			}
		}
	}
	return res, nil
}

func filterEachNode(ctx context.Context, prof framework.Framework, pod *v1.Pod, names []string) ([]string, map[string]nodeStatus, map[string]map[string]int64, error) {
	state := framework.NewCycleState()
	pre, status, plugins := prof.RunPreFilterPlugins(ctx, state, pod)
	if !status.IsSuccess() {
		return nil, nil, nil, fmt.Errorf("PreFilter rejected a pod SchedulePod placed: %v", status.Message())
	}
	var fits []fwk.NodeInfo
	feasible := []string{}
	rejected := map[string]nodeStatus{}
	lister := prof.SnapshotSharedLister().NodeInfos()
	for _, name := range names {
		if !pre.AllNodes() && !pre.NodeNames.Has(name) {
			rejected[name] = nodeStatus{
				Code:    fwk.UnschedulableAndUnresolvable.String(),
				Reasons: []string{fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(plugins))},
			}
			continue
		}
		info, err := lister.Get(name)
		if err != nil {
			return nil, nil, nil, err
		}
		st := prof.RunFilterPluginsWithNominatedPods(ctx, state, pod, info)
		if st.IsSuccess() {
			feasible = append(feasible, name)
			fits = append(fits, info)
		} else {
			rejected[name] = describe(st)
		}
	}
	scores, err := score(ctx, prof, state, pod, fits)
	return feasible, rejected, scores, err
}

// score runs PreScore and Score over the feasible nodes as schedulePod does.
func score(ctx context.Context, prof framework.Framework, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (map[string]map[string]int64, error) {
	if len(nodes) == 0 {
		return nil, nil
	}
	if st := prof.RunPreScorePlugins(ctx, state, pod, nodes); !st.IsSuccess() {
		return nil, fmt.Errorf("PreScore: %v", st.Message())
	}
	found, st := prof.RunScorePlugins(ctx, state, pod, nodes)
	if !st.IsSuccess() {
		return nil, fmt.Errorf("Score: %v", st.Message())
	}
	scores := make(map[string]map[string]int64, len(found))
	for _, node := range found {
		plugins := make(map[string]int64, len(node.Scores))
		for _, plugin := range node.Scores {
			plugins[plugin.Name] = plugin.Score
		}
		scores[node.Name] = plugins
	}
	return scores, nil
}

func describe(st *fwk.Status) nodeStatus {
	return nodeStatus{Code: st.Code().String(), Plugin: st.Plugin(), Reasons: st.Reasons()}
}
