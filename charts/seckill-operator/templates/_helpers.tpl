{{- define "seckill.fullname" -}}{{ printf "%s-operator" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- define "seckill.labels" -}}
app.kubernetes.io/name: seckill-operator
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version }}
{{- end -}}
