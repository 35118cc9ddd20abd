# One image for the operator and the workloads: static, non-root.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o /out/seckill-operator . \
 && CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w" -o /out/seckill ./workloads/cmd/seckill

FROM gcr.io/distroless/static:nonroot
COPY --from=build /out/seckill-operator /seckill-operator
COPY --from=build /out/seckill /seckill
USER 65532:65532
ENTRYPOINT ["/seckill-operator"]
