{{/* Object names are fixed (not prefixed by the release): the controller finds its Secret, Service and webhook
configuration by these names, and only one installation per cluster makes sense (the webhook is cluster-wide). */}}

{{- define "persistent-ips.labels" -}}
app.kubernetes.io/part-of: persistent-ips
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{- define "persistent-ips.selectorLabels" -}}
app.kubernetes.io/name: persistent-ips
app.kubernetes.io/component: controller
{{- end }}

{{- define "persistent-ips.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default (printf "v%s" .Chart.AppVersion) }}
{{- end }}

{{- define "persistent-ips.selfManagedTls" -}}
{{- if eq .Values.tls.mode "self-managed" }}true{{ else if eq .Values.tls.mode "cert-manager" }}{{ else }}{{ fail "tls.mode must be self-managed or cert-manager" }}{{ end }}
{{- end }}
