# The real capture as it is: a healthy 2×H200 node (driver 580.159.04).
true
