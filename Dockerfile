# syntax=docker/dockerfile:1
# authd: a static binary on distroless, running as a non-root user, with no
# shell. Build:   docker build -t REGISTRY/authd:VERSION .
# Run:     docker run -p 8080:8080 -p 9090:9090 -e AUTHD_DATABASE_URL=… -e AUTHD_SECRET=… REGISTRY/authd:VERSION
# The default command is "serve"; "migrate up", "users add …", "clients …"
# and "version" run the same way (docker run … REGISTRY/authd:VERSION migrate up).

# The toolchain of go.mod's toolchain line (a test keeps them in step).
FROM golang:1.26.11-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Static (no cgo), reproducible paths; the VCS revision is stamped when the
# build context holds .git (authd version prints it).
RUN git config --global --add safe.directory /src && \
    CGO_ENABLED=0 GOTOOLCHAIN=local go build -trimpath -buildvcs=auto -ldflags='-s -w' -o /out/authd ./cmd/authd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/authd /authd
# distroless's nonroot user, by number: Kubernetes can check runAsNonRoot
# only against a numeric user (deploy/ sets runAsUser to the same).
USER 65532:65532
# Listen on every interface inside the container: the public listener and
# the operations listener (/metrics, /healthz, /readyz); publish only 8080.
ENV AUTHD_ADDR=:8080 \
    AUTHD_OPS_ADDR=:9090
EXPOSE 8080 9090
ENTRYPOINT ["/authd"]
CMD ["serve"]
