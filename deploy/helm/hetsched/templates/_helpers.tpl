{{/*
The name of every object: fullnameOverride, else the release name when it
contains the chart's name, else RELEASE-hetsched. At most 55 characters, so
that FULLNAME-metrics (the Service) is a valid DNS label.
*/}}
{{- define "hetsched.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 55 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 55 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* What selects the pods: stable across upgrades (a Deployment's selector cannot change). */}}
{{- define "hetsched.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The recommended labels of every object. */}}
{{- define "hetsched.labels" -}}
{{ include "hetsched.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{/* The image: repository@digest, else repository:tag (the appVersion when empty). */}}
{{- define "hetsched.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{- define "hetsched.leaseNamespace" -}}
{{- .Values.leaderElection.leaseNamespace | default .Release.Namespace -}}
{{- end -}}

{{- define "hetsched.leaseName" -}}
{{- .Values.leaderElection.leaseName | default (include "hetsched.fullname" .) -}}
{{- end -}}

{{/* http or https: the metrics port serves TLS with metrics.auth kubernetes only. */}}
{{- define "hetsched.metricsScheme" -}}
{{- if eq .Values.metrics.auth "kubernetes" }}https{{ else }}http{{ end -}}
{{- end -}}

{{/*
hetsched.refuseWhenOff fails when a switch is off and a value it governs is
set: the project's rule is never to ignore an input. Arguments: a list of
the switch's path, whether it is on, and a dict of governed path: value.
*/}}
{{- define "hetsched.refuseWhenOff" -}}
{{- $switch := index . 0 -}}
{{- $on := index . 1 -}}
{{- $governed := index . 2 -}}
{{- if not $on -}}
{{- range $path := keys $governed | sortAlpha -}}
{{- if index $governed $path -}}
{{- fail (printf "%s is set, but %s is off: it would be ignored" $path $switch) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* Every refusal of a combination of values the schema cannot express. */}}
{{- define "hetsched.validate" -}}
{{- if and (gt (int .Values.replicas) 1) (not .Values.leaderElection.enabled) -}}
{{- fail (printf "replicas is %d with leaderElection.enabled false: every replica would schedule the same pods; set replicas: 1 or leaderElection.enabled: true" (int .Values.replicas)) -}}
{{- end -}}
{{- $le := .Values.leaderElection -}}
{{- include "hetsched.refuseWhenOff" (list "leaderElection.enabled" $le.enabled (dict "leaderElection.leaseNamespace" $le.leaseNamespace "leaderElection.leaseName" $le.leaseName "leaderElection.leaseDuration" $le.leaseDuration "leaderElection.renewDeadline" $le.renewDeadline "leaderElection.retryPeriod" $le.retryPeriod)) -}}
{{- $sm := .Values.serviceMonitor -}}
{{- include "hetsched.refuseWhenOff" (list "serviceMonitor.enabled" $sm.enabled (dict "serviceMonitor.labels" $sm.labels "serviceMonitor.interval" $sm.interval "serviceMonitor.scrapeTimeout" $sm.scrapeTimeout "serviceMonitor.tls.insecureSkipVerify" $sm.tls.insecureSkipVerify "serviceMonitor.tls.serverName" $sm.tls.serverName "serviceMonitor.tls.caSecret.name" $sm.tls.caSecret.name "serviceMonitor.tls.caSecret.key" $sm.tls.caSecret.key)) -}}
{{- $https := eq .Values.metrics.auth "kubernetes" -}}
{{- include "hetsched.refuseWhenOff" (list "metrics.auth kubernetes (HTTPS)" $https (dict "metrics.tlsSecret" .Values.metrics.tlsSecret "serviceMonitor.tls.insecureSkipVerify" $sm.tls.insecureSkipVerify "serviceMonitor.tls.serverName" $sm.tls.serverName "serviceMonitor.tls.caSecret.name" $sm.tls.caSecret.name "metrics.prometheusServiceAccount.name" .Values.metrics.prometheusServiceAccount.name)) -}}
{{- include "hetsched.refuseWhenOff" (list "serviceMonitor.tls.caSecret.name" $sm.tls.caSecret.name (dict "serviceMonitor.tls.caSecret.key" $sm.tls.caSecret.key)) -}}
{{- if and $sm.enabled $https (not $sm.tls.insecureSkipVerify) (not $sm.tls.caSecret.name) -}}
{{- fail "serviceMonitor.enabled with metrics.auth kubernetes: Prometheus cannot check the HTTPS port's certificate; set serviceMonitor.tls.insecureSkipVerify: true (the self-signed certificate), or metrics.tlsSecret and serviceMonitor.tls.caSecret.name" -}}
{{- end -}}
{{- if and $sm.tls.insecureSkipVerify $sm.tls.caSecret.name -}}
{{- fail "serviceMonitor.tls.caSecret.name is set, but serviceMonitor.tls.insecureSkipVerify is true: the CA would be ignored" -}}
{{- end -}}
{{- if and $sm.tls.caSecret.name (not .Values.metrics.tlsSecret) -}}
{{- fail "serviceMonitor.tls.caSecret.name is set without metrics.tlsSecret: the self-signed certificate is signed by no CA" -}}
{{- end -}}
{{- $sa := .Values.metrics.prometheusServiceAccount -}}
{{- if and $sa.namespace (not $sa.name) -}}
{{- fail "metrics.prometheusServiceAccount.namespace is set without metrics.prometheusServiceAccount.name: it would be ignored" -}}
{{- end -}}
{{- $rs := .Values.resourceSchedule -}}
{{- include "hetsched.refuseWhenOff" (list "resourceSchedule.create" $rs.create (dict "resourceSchedule.priorityTiers" $rs.priorityTiers "resourceSchedule.policy" $rs.policy "resourceSchedule.namespaceQueues" $rs.namespaceQueues)) -}}
{{- with $rs.priorityTiers -}}
{{- if not (and (ge (int64 .urgent) (int64 .high)) (ge (int64 .high) (int64 .medium))) -}}
{{- fail (printf "resourceSchedule.priorityTiers: urgent (%v) >= high (%v) >= medium (%v) does not hold" .urgent .high .medium) -}}
{{- end -}}
{{- end -}}
{{- $names := dict -}}
{{- range .Values.queues -}}
{{- if hasKey $names .name -}}
{{- fail (printf "queues: %s is listed twice" .name) -}}
{{- end -}}
{{- $_ := set $names .name true -}}
{{- end -}}
{{- end -}}
