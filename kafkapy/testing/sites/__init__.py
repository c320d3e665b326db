"""Test sites for stretch-cluster tests: network namespaces joined through a WAN emulator.

See docs/multi-dc.md ("Test sites"): ``network.SiteNetwork`` builds the sites, ``wan`` decides
each packet's delay or drop, ``wan_daemon`` moves the packets.
"""
