{{- define "gpuledger.labels" -}}
app.kubernetes.io/name: gpuledger
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: gpuledger-{{ .Chart.Version }}
{{- end }}

{{- /* The Secret holding the PostgreSQL URL (the values' or the chart's own); "" for SQLite. */ -}}
{{- define "gpuledger.postgresSecret" -}}
{{- if .Values.server.postgres.existingSecret -}}
{{- .Values.server.postgres.existingSecret -}}
{{- else -}}
{{- if .Values.server.postgres.url -}}
{{- .Release.Name }}-postgres
{{- end -}}
{{- end -}}
{{- end -}}
