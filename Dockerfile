# One image for every process of a minibroker cluster: ZooKeeper (Debian's
# jars), controllers, brokers and the command-line tools. The entrypoint
# (minibroker/container.py) turns KAFKA_* / ZOOKEEPER_* environment variables
# into a properties file and execs the process; see docs/operations.md, "docker-compose".
#
#   docker build -t minibroker .                                    # any machine with a registry
#   docker build --build-arg BASE_IMAGE=localhost/bookworm-base .   # the local base image
#
# Any Debian bookworm image works as the base: Python comes from Debian, not the
# base image, so the public python image and a bare debootstrap build the same thing.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ENV DEBIAN_FRONTEND=noninteractive \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/minibroker/bin:$PATH

# ZooKeeper's jars and a headless JRE (also what the Spark audit runs on), Python with venv. Not the
# `zookeeper` package: it wants the desktop JRE (GTK, Mesa, LLVM: half a gigabyte) for init scripts we
# do not use. No apt cache left behind: a debootstrap base does not clean it by itself.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
        ca-certificates default-jre-headless libzookeeper-java python3 python3-venv \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*

# Dependencies first, from pyproject.toml alone: editing the code does not re-download them. The core's and
# the `audit` extra's (the compose file's `audit` service runs `minibroker audit` in this image).
COPY pyproject.toml /src/pyproject.toml
RUN python3 -m venv /opt/minibroker \
 && python3 -c 'import tomllib; p = tomllib.load(open("/src/pyproject.toml", "rb"))["project"]; \
print("\n".join(p["dependencies"] + p["optional-dependencies"]["audit"]))' \
        > /tmp/requirements.txt \
 && /opt/minibroker/bin/pip install -q -r /tmp/requirements.txt "setuptools>=68" wheel \
 && rm /tmp/requirements.txt

# Extras of the project to install (comma-separated; e.g. PIP_EXTRAS=audit,test for the test tools too).
ARG PIP_EXTRAS="audit"
COPY . /src
# The build backend is in the venv already: a code change rebuilds offline, in seconds.
RUN /opt/minibroker/bin/pip install -q --no-build-isolation "/src${PIP_EXTRAS:+[$PIP_EXTRAS]}" \
 && rm -rf /src /root/.cache

WORKDIR /var/lib/minibroker
ENTRYPOINT ["python", "-m", "minibroker.container"]
CMD ["--help"]
