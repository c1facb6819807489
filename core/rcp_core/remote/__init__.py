"""Copies between hosts: the ``rcpd`` roles and the wire between them.

The protocol (roles, connections, frames, versions, security, flow) is documented in
``docs/remote_protocol.md``. Modules:

=================  ==================================================================
``wire``           frames: encoding, and a reader bounded in memory and time
``hello``          the first frame each way; version negotiation; roles
``tls``            per-run identities, pinned certificates, TLS 1.3 contexts
``connection``     a framed, authenticated connection: dial, accept, greet, expect
``operands``       ``[user@]host[:port]:/path`` operands
``meta``           entry metadata on the wire, rebuilt as ``os.stat_result``
``job``            a copy's settings on the wire
``send``           the source role: walk, announce directories, send entries
``receive``        the destination role: write entries with the local copy's rules
``incoming``       a large file arriving in chunks at the destination
``dry``            a destination that only says what it would do (``--dry-run``)
``rolerun``        each role's run: its host's plugins, retries, fail-early, throttle
``roles``          both roles wired to their connections
``ssh``            starting ``rcpd`` on another host over SSH
``daemon``         ``rcpd``: a role started over SSH, talking to its master
``master``         starts the roles (SSH or in-process), hands out jobs, merges results
``outcome``        a service's job or a copy between places judged by the engine's rule
``service``        ``rcpd serve``: copy jobs and file requests for clients
``jobs``           a service's copy jobs: queued, run, watched, kept a while
``service_roles``  a service as one side of a copy between hosts
``service_copy``   copies between this host and services, or two services
``roots``          a service's paths confined beneath its roots
``client``         a service's client: jobs, and entries to look at, read and write
``files``          a service's file requests: stat, list, read, write, mkdir, remove
``filewire``       file requests on the wire: limits, entries, failures
``listing``        a directory listed in pages
``writes``         a file written through a temporary renamed into place (service)
``writer``         a file written through a service (client)
=================  ==================================================================

Nothing here is imported by a local copy (the ``rcp`` command imports the master only
when an operand is remote).
"""

from __future__ import annotations

SERVICE_PORT = 7450
"""The port ``rcpd serve`` listens on unless told another (here, where reading it
costs nothing: Airflow's form shows it at every component's start)."""
