{{- define "gpuledger.labels" -}}
app.kubernetes.io/name: gpuledger
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: gpuledger-{{ .Chart.Version }}
{{- end }}
