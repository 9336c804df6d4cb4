# gnuplot curve.gp: curve.png from curve.dat (tests/bench/multicore.sh, 16-CPU machine)
set terminal pngcairo size 900,520 noenhanced
set output 'curve.png'
set title "Short connections (64 B, 400 in flight): QPS against server CPUs\nload on 8 other CPUs; 16-vCPU Xeon, Linux 6.18"
set xlabel "server CPUs"
set ylabel "thousand connections/s"
set logscale x 2
set xtics (1, 2, 4, 8)
set key top left
set xrange [0.85:9.5]
set grid
plot 'curve.dat' using 1:2 with linespoints lw 2 title 'SO_REUSEPORT epoll, a thread per CPU (run 3)', \
     '' using 1:3 with linespoints lw 2 title 'lfepolld, new default: G=CPUs, W=1, CPUs/2 accept threads (run 3)', \
     '' using 1:4 with linespoints dt 2 title 'SO_REUSEPORT epoll (run 1)', \
     '' using 1:5 with linespoints dt 2 title 'lfepolld, old default: groups of 4, 1 accept thread per 4 CPUs (run 1)'
