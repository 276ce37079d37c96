{{/* The chart's name, or nameOverride. */}}
{{- define "gpu-labeler.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The objects' base name: fullnameOverride, else the release name when it holds the chart's
name (`helm install gpu-labeler ...` gives `gpu-labeler`, the kustomize names), else both.
Suffixes (-nvidia, -config, -own-node, ...) are added to it, so it stops at 40 characters. */}}
{{- define "gpu-labeler.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 40 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 40 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "gpu-labeler.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "gpu-labeler.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "gpu-labeler.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name: the name of an existing service account when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* A name as a literal inside the admission policies' CEL regular expressions ('...'): the
name must be a DNS-1123 subdomain (checked here whatever the schema let through, as the name
reaches CEL: a quote in it would end the string and add an expression), its dots escaped
(`\\.` in a CEL string is the regex's `\.`). */}}
{{- define "gpu-labeler.celName" -}}
{{- if not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$" .) }}
{{- fail (printf "%q is not a DNS-1123 subdomain (a service account's name): refused, as it would reach the admission policies' CEL" .) }}
{{- end }}
{{- replace "." "\\\\." . }}
{{- end }}

{{/* The agents' service account, as the policies' match conditions name it. */}}
{{- define "gpu-labeler.celServiceAccount" -}}
{{- include "gpu-labeler.celName" (include "gpu-labeler.serviceAccountName" .) }}
{{- end }}

{{/* Labels of every object: the kustomize base's app.kubernetes.io/name, plus Helm's. */}}
{{- define "gpu-labeler.labels" -}}
app.kubernetes.io/name: {{ include "gpu-labeler.name" . | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/instance: {{ .Release.Name | quote }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service | quote }}
{{- end }}

{{- define "gpu-labeler.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The allowedKey of the Node policy: NFD's namespaces; with the nvidia-gfd profile, also
exactly GFD's keys (deploy/components/nvidia-gfd; GFD_KEYS of src/config.rs). */}}
{{- define "gpu-labeler.nodeAllowedKey" -}}
{{- if has "nvidia-gfd" .Values.profiles -}}
r'^(f:)?(([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*(feature|profile)\.node\.kubernetes\.io/|nvidia\.com/(gpu\.(product|count|memory|family|machine|mode|replicas|sharing-strategy|clique|compute\.(major|minor)|multiprocessors|slices\.(gi|ci)|engines\.(copy|decoder|encoder|jpeg|ofa))|cuda\.(driver|runtime|driver-version|runtime-version)\.(major|minor|rev|revision|full)|mig\.(capable|strategy)|mps\.capable|vgpu\.(present|host-driver-version|host-driver-branch)|mig-[a-z0-9.]+\.(count|memory|multiprocessors|product|replicas|sharing-strategy|slices\.(gi|ci)|engines\.(copy|decoder|encoder|jpeg|ofa))|gfd\.timestamp)$)'
{{- else -}}
r'^(f:)?([a-z0-9]([-a-z0-9]*[a-z0-9])?\.)*(feature|profile)\.node\.kubernetes\.io/'
{{- end }}
{{- end }}

{{/* The annotations of the post-delete prune hook's objects; the argument is the hook weight
(its service account and RBAC before its Job). */}}
{{- define "gpu-labeler.pruneHook" -}}
helm.sh/hook: post-delete
helm.sh/hook-weight: {{ . | quote }}
helm.sh/hook-delete-policy: before-hook-creation,hook-succeeded
{{- end }}
