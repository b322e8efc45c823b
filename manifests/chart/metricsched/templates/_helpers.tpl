{{/*
Names and labels shared by every template. Names are cut to 63 characters (the DNS label
limit) with any trailing dash removed.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "metricsched.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's resources: fullnameOverride, else the release name if it
already contains the chart name (helm install metricsched ... gives "metricsched", not
"metricsched-metricsched"), else release-chart.
*/}}
{{- define "metricsched.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* chart-version, for the helm.sh/chart label. */}}
{{- define "metricsched.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "metricsched.labels" -}}
helm.sh/chart: {{ include "metricsched.chart" . }}
{{ include "metricsched.selectorLabels" . }}
app.kubernetes.io/version: {{ include "metricsched.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/component: scheduler
app.kubernetes.io/part-of: metricsched
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Labels that select the operator's pods; never change them after a release exists. */}}
{{- define "metricsched.selectorLabels" -}}
app.kubernetes.io/name: {{ include "metricsched.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/* The ServiceAccount the operator runs as. */}}
{{- define "metricsched.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "metricsched.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* The image tag: image.tag, else the chart's appVersion. */}}
{{- define "metricsched.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{/* repository:tag of the operator image. */}}
{{- define "metricsched.image" -}}
{{- printf "%s:%s" .Values.image.repository (include "metricsched.imageTag" .) }}
{{- end }}

{{/* "true" when leader election runs: on by default, and always with more than one replica. */}}
{{- define "metricsched.leaderElection" -}}
{{- if or .Values.leaderElection.enabled (gt (int (include "metricsched.replicas" .)) 1) }}true{{ else }}false{{ end }}
{{- end }}

{{/*
Name of the leader-election Lease (METRICSCHED_LEADER_ELECTION_ID). One per release, so
two releases in one namespace (say, two scheduler names) do not share a leader.
*/}}
{{- define "metricsched.leaseName" -}}
{{- include "metricsched.fullname" . }}
{{- end }}

{{/* Where the Prometheus bearer token and CA bundle are mounted. */}}
{{- define "metricsched.tokenDir" -}}/etc/metricsched/prometheus-token{{- end }}
{{- define "metricsched.caDir" -}}/etc/metricsched/prometheus-ca{{- end }}
{{- define "metricsched.metricsCertDir" -}}/etc/metricsched/metrics-cert{{- end }}
{{- define "metricsched.passwordDir" -}}/etc/metricsched/prometheus-password{{- end }}
{{- define "metricsched.clientCertDir" -}}/etc/metricsched/prometheus-client-cert{{- end }}

{{/* prometheus.headers as METRICSCHED_PROMETHEUS_HEADERS: NAME=VALUE,... sorted by name. */}}
{{- define "metricsched.headerDir" -}}/etc/metricsched/prometheus-headers{{- end }}

{{/* NAME=PATH pairs of prometheus.headerSecrets, each mounted at headerDir/<index>/value. */}}
{{- define "metricsched.prometheusHeaderFiles" -}}
{{- $pairs := list }}
{{- range $i, $h := .Values.prometheus.headerSecrets }}
{{- $pairs = append $pairs (printf "%s=%s/%d/value" $h.header (include "metricsched.headerDir" $) $i) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{- define "metricsched.prometheusHeaders" -}}
{{- $pairs := list }}
{{- range $name := keys . | sortAlpha }}
{{- $pairs = append $pairs (printf "%s=%s" $name (index $ $name)) }}
{{- end }}
{{- join "," $pairs }}
{{- end }}

{{/* Labels of one alert: (list $ severity), or (list $ severity extra) with labels the
expression cannot carry (they win over prometheusRule.alertLabels). */}}
{{- define "metricsched.alertLabels" -}}
{{- $root := index . 0 }}
{{- $extra := dict }}
{{- if gt (len .) 2 }}{{ $extra = index . 2 }}{{ end }}
{{- merge $extra (dict "severity" (index . 1)) $root.Values.prometheusRule.alertLabels | toYaml }}
{{- end }}

{{/* Namespace opt-in webhook: the schedulerName it sets (webhook.schedulerName, else the
first of schedulerNames), its Service, the Secret with its certificate, where that is
mounted, and the namespaces never sent to it (kube-system, the release's, and more). */}}
{{- define "metricsched.webhookSchedulerName" -}}
{{- default (first .Values.schedulerNames) .Values.webhook.schedulerName }}
{{- end }}
{{- define "metricsched.webhookServiceName" -}}
{{- printf "%s-webhook" (include "metricsched.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- define "metricsched.webhookSecretName" -}}
{{- if .Values.webhook.existingSecret.name }}
{{- .Values.webhook.existingSecret.name }}
{{- else }}
{{- printf "%s-webhook-tls" (include "metricsched.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- define "metricsched.webhookCertDir" -}}/etc/metricsched/webhook-cert{{- end }}
{{- define "metricsched.webhookExcludedNamespaces" -}}
{{- concat (list "kube-system" .Release.Namespace) .Values.webhook.excludedNamespaces | uniq | toJson }}
{{- end }}

{{/* The fields both webhook entries share: (dict "root" $ "service" name "caBundle" b64). */}}
{{- define "metricsched.webhookCommon" -}}
admissionReviewVersions: ["v1"]
sideEffects: None
failurePolicy: Ignore
timeoutSeconds: {{ .root.Values.webhook.timeoutSeconds }}
matchPolicy: Equivalent
reinvocationPolicy: Never
rules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["CREATE"]
    resources: ["pods"]
    scope: Namespaced
clientConfig:
  service:
    name: {{ .service }}
    namespace: {{ .root.Release.Namespace }}
    path: /scheduler-name
    port: 443
  {{- with .caBundle }}
  caBundle: {{ . }}
  {{- end }}
{{- end }}

{{/* The names of the webhook's entries (JSON list), as the API server's metrics name them. */}}
{{- define "metricsched.webhookNames" -}}
{{- $names := list "scheduler-name.webhook.metricsched.io" }}
{{- if .Values.webhook.podOptIn.enabled }}
{{- $names = append $names "scheduler-name-by-pod-label.webhook.metricsched.io" }}
{{- end }}
{{- toJson $names }}
{{- end }}

{{/* PromQL matcher of those names: name="..." for one, name=~"...|..." for both (a dot
in the pattern matches any character, which no other webhook's name can exploit). */}}
{{- define "metricsched.webhookNameMatcher" -}}
{{- $names := include "metricsched.webhookNames" . | fromJsonArray }}
{{- if eq (len $names) 1 }}name={{ first $names | quote }}{{ else }}name=~{{ join "|" $names | quote }}{{ end }}
{{- end }}

{{/* Replicas: replicaCount, else 2 with the webhook (a lone replica's restart or upgrade
fails every opted-in pod creation open, to default-scheduler for good) and 1 without. */}}
{{- define "metricsched.replicas" -}}
{{- if kindIs "invalid" .Values.replicaCount }}{{ if .Values.webhook.enabled }}2{{ else }}1{{ end }}{{ else }}{{ int .Values.replicaCount }}{{ end }}
{{- end }}

{{/* "true" when the PodDisruptionBudget is made: podDisruptionBudget.enabled, else with
the webhook and more than one replica. */}}
{{- define "metricsched.pdb" -}}
{{- $on := .Values.podDisruptionBudget.enabled }}
{{- if kindIs "invalid" $on }}{{ $on = and .Values.webhook.enabled (gt (int (include "metricsched.replicas" .)) 1) }}{{ end }}
{{- if $on }}true{{ else }}false{{ end }}
{{- end }}
